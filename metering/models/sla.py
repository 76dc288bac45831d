from django.conf import settings
from django.db import models

from metering.models.factory import Deployment, Pool
from portal.models import Tenant


class IncidentSeverity(models.TextChoices):
    SEV1 = "sev1", "SEV1"
    SEV2 = "sev2", "SEV2"
    SEV3 = "sev3", "SEV3"
    SEV4 = "sev4", "SEV4"


class IncidentImpact(models.TextChoices):
    """Same values as metering.uptime.Impact; the weights live there."""

    MAJOR_OUTAGE = "major_outage", "Major outage"
    PARTIAL_OUTAGE = "partial_outage", "Partial outage"
    DEGRADED = "degraded", "Degraded performance"


class IncidentStatus(models.TextChoices):
    """The lifecycle, in order; an incident only moves forward."""

    INVESTIGATING = "investigating", "Investigating"
    IDENTIFIED = "identified", "Identified"
    MONITORING = "monitoring", "Monitoring"
    RESOLVED = "resolved", "Resolved"


class Incident(models.Model):
    """A service disruption from `started_at` until `resolved_at` (None: ongoing).

    `impact` is the opening impact; an update may change it from its time on (kpis.md 3b).
    The incident concerns the named deployments and every deployment of the named pools
    (none named: every deployment), and the named tenants (none: every tenant that used
    them). `status` is `resolved` exactly when `resolved_at` is set."""

    title = models.CharField(max_length=200)
    severity = models.CharField(max_length=8, choices=IncidentSeverity.choices)
    impact = models.CharField(max_length=16, choices=IncidentImpact.choices)
    status = models.CharField(
        max_length=16, choices=IncidentStatus.choices, default=IncidentStatus.INVESTIGATING
    )
    started_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    deployments = models.ManyToManyField(Deployment, blank=True, related_name="incidents")
    pools = models.ManyToManyField(Pool, blank=True, related_name="incidents")
    tenants = models.ManyToManyField(Tenant, blank=True, related_name="incidents")
    cause = models.TextField(blank=True)  # postmortem
    remediation = models.TextField(blank=True)  # postmortem
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["started_at"], name="incident_started_idx")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(resolved_at__isnull=True)
                | models.Q(resolved_at__gte=models.F("started_at")),
                name="incident_resolved_after_start",
            ),
            models.CheckConstraint(
                condition=models.Q(status="resolved", resolved_at__isnull=False)
                | (~models.Q(status="resolved") & models.Q(resolved_at__isnull=True)),
                name="incident_resolved_status_matches",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None


class IncidentUpdate(models.Model):
    """A timestamped public update of an incident: its status from `time` on, a message, and
    optionally a new impact from `time` on."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="updates")
    time = models.DateTimeField()
    status = models.CharField(max_length=16, choices=IncidentStatus.choices)
    impact = models.CharField(  # empty: the impact does not change
        max_length=16, choices=IncidentImpact.choices, blank=True, default=""
    )
    message = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["incident", "time", "id"]

    def __str__(self) -> str:
        return f"{self.incident_id} {self.status} @ {self.time:%Y-%m-%d %H:%M}"


class MaintenanceWindow(models.Model):
    """Announced maintenance [starts_at, ends_at) on the named deployments and every
    deployment of the named pools (none named: every deployment). Excluded from uptime.
    Announced in advance (`announced_at` < `starts_at`: recorded ahead, or imported later
    with the `announced_at` it had), and never changed once started."""

    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    deployments = models.ManyToManyField(Deployment, blank=True, related_name="maintenance_windows")
    pools = models.ManyToManyField(Pool, blank=True, related_name="maintenance_windows")
    announced_at = models.DateTimeField()  # when tenants were told
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["starts_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")),
                name="maintenance_ends_after_start",
            ),
            models.CheckConstraint(
                condition=models.Q(announced_at__lt=models.F("starts_at")),
                name="maintenance_announced_in_advance",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.title} {self.starts_at:%Y-%m-%d %H:%M}"
