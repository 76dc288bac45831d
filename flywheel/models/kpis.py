from django.db import models


class KpiSnapshot(models.Model):
    """Every KPI of one scope (`factory` or a pool slug) over one day or month, upserted by
    the measure job on (scope, period_kind, period_start); closed once the period is over."""

    class PeriodKind(models.TextChoices):
        DAY = "day"
        MONTH = "month"

    scope = models.CharField(max_length=64)
    period_kind = models.CharField(max_length=8, choices=PeriodKind.choices)
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    telemetry = models.CharField(max_length=16)
    # The figures of GET /api/v1/kpis: ratios and money as decimal strings, tokens as ints.
    values = models.JSONField()
    # Factory rows only: each pool's additive sums (PoolSums.as_json), so the pages combine
    # any run of days exactly without measuring again, and a month's counters read them.
    sums = models.JSONField(default=dict, blank=True)
    rating_errors = models.JSONField(default=dict, blank=True)  # tenant slug -> message
    is_closed = models.BooleanField(default=False)  # the period was over when measured
    measured_at = models.DateTimeField()

    class Meta:
        ordering = ["scope", "period_kind", "period_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "period_kind", "period_start"], name="kpi_snapshot_key"
            )
        ]
        indexes = [models.Index(fields=["period_kind", "period_start"], name="kpi_snapshot_time")]

    def __str__(self) -> str:
        return f"{self.scope} {self.period_kind} {self.period_start:%Y-%m-%d}"
