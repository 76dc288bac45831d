from django.conf import settings
from django.db import models


class MonthClose(models.Model):
    """One month-end close (billing.services.close): started once, resumed until every step
    is done. Its month is locked (portal.closing) by its first step."""

    month = models.DateTimeField(unique=True)  # first instant of the UTC month
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT
    )
    error = models.TextField(blank=True)  # why the last run stopped, until a run finishes

    class Meta:
        ordering = ["-month"]

    def __str__(self) -> str:
        return f"close {self.month:%Y-%m}"


class CloseStep(models.Model):
    """A step of a close, recorded when done (in the step's own transaction where it writes)."""

    close = models.ForeignKey(MonthClose, on_delete=models.CASCADE, related_name="steps")
    name = models.CharField(max_length=16)
    done_at = models.DateTimeField()
    detail = models.JSONField(default=dict)

    class Meta:
        ordering = ["close_id", "done_at", "id"]
        constraints = [models.UniqueConstraint(fields=["close", "name"], name="close_step_once")]

    def __str__(self) -> str:
        return f"{self.close} {self.name}"
