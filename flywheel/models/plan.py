from django.db import models

from flywheel.domain.plan.explain import ETS, NONE, SEASONAL_NAIVE_DRIFT


class Forecast(models.Model):
    """The forecast of one daily series (kpis.md 6b: the factory's, a pool's or a model's
    production or revenue) and its measured accuracy: the forecast job's read model, one row
    per (scope, metric), replaced by each run. Pages and the API read it; none fits a model.
    Values are estimates (floats); money is rounded where it is shown."""

    class Metric(models.TextChoices):
        TOKENS = "tokens"  # production, output-token units (kpis.md section 1)
        REVENUE = "revenue"  # realized revenue after promotions, as rated

    class Method(models.TextChoices):
        ETS = ETS
        SEASONAL_NAIVE_DRIFT = SEASONAL_NAIVE_DRIFT
        NONE = NONE

    scope = models.CharField(max_length=140)  # "factory", a pool slug or "model:<slug>"
    metric = models.CharField(max_length=8, choices=Metric.choices)
    method = models.CharField(max_length=24, choices=Method.choices)
    note = models.TextField(blank=True)  # why there is none, or why ETS gave way
    history_start = models.DateField()  # the series' first closed day
    history = models.JSONField(default=list)  # its closed days' values, oldest first
    forecast_start = models.DateField()  # the day after the last closed day
    # Per day from forecast_start: [mean, lo80, hi80, lo95, hi95], never below 0.
    points = models.JSONField(default=list)
    # Per month of the horizon: {"month": "YYYY-MM", "actual", "forecast", "is_whole"}.
    monthly = models.JSONField(default=list)
    is_clipped = models.BooleanField(default=False)  # a value fell below 0 and was set to 0
    mape = models.FloatField(null=True)  # the backtest's, over its origins' days
    baseline_mape = models.FloatField(null=True)  # the seasonal naive's, on the same days
    origins = models.JSONField(default=list)  # the first day each origin forecast (ISO)
    made_at = models.DateTimeField()

    class Meta:
        ordering = ["scope", "metric"]
        constraints = [
            models.UniqueConstraint(fields=["scope", "metric"], name="forecast_series"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.metric} from {self.forecast_start}"


class CapacityPlan(models.Model):
    """The capacity plan (kpis.md 6c) as the forecast job made it: `latest` the last run's,
    and per month ("YYYY-MM") the plan as it stood at that month's start (the month's first
    run, never replaced), so plan against actual compares with what was planned then.
    `body` is the plan as GET /api/v1/capacity-plan answers it."""

    LATEST = "latest"

    key = models.CharField(max_length=8, unique=True)
    made_at = models.DateTimeField()
    body = models.JSONField()

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return f"capacity plan {self.key} made {self.made_at:%Y-%m-%d %H:%M}"
