from django.db import models


class CounterMonth(models.Model):
    """One UTC month's part of every counter /metrics publishes (flywheel.domain.counters,
    MonthCounts.as_json) over [month, until): written by the measure stage with the month's
    KPI snapshot, from the same read models. A counter is the sum of its months."""

    month = models.DateTimeField(unique=True)  # first instant of the UTC month
    until = models.DateTimeField()  # the end of the month, or of its measured part
    counts = models.JSONField()
    measured_at = models.DateTimeField()

    class Meta:
        ordering = ["month"]

    def __str__(self) -> str:
        return f"counters {self.month:%Y-%m} until {self.until:%Y-%m-%d %H:%M}"


class CounterValue(models.Model):
    """The value /metrics publishes for one counter series: the sum of its months when it
    was last measured, never lower than before (a correction that lowers a past figure
    waits for later growth instead of reading as a counter reset)."""

    name = models.CharField(max_length=100)  # the counter's family (without _total)
    # its labels as the text exposition writes them: pool="h100-a",currency="USD"
    labels = models.CharField(max_length=500)
    value = models.DecimalField(max_digits=40, decimal_places=12)

    class Meta:
        ordering = ["name", "labels"]
        constraints = [
            models.UniqueConstraint(fields=["name", "labels"], name="counter_value_series")
        ]

    def __str__(self) -> str:
        return f"{self.name}{self.labels} {self.value}"
