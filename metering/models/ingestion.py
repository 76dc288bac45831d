from django.db import models

from metering.models.factory import Deployment


class SourceSeen(models.Model):
    """When an ingestion source last sent usage of a deployment: one upsert per batch, source
    and deployment (architecture.md "Ingestion"). The metering page's sources and the
    "source silent" rule (kpis.md section 3c) read it."""

    source = models.CharField(max_length=128)
    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, db_constraint=False)
    last_event_at = models.DateTimeField()  # the newest event time it sent
    last_received_at = models.DateTimeField()  # when its last batch arrived

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "deployment"], name="source_seen_unique")
        ]


class IngestRejection(models.Model):
    """A batch refused whole, or an OTLP export whose spans were partly rejected: kept 7 days
    for the ingestion debugger (no payload: what was refused and why)."""

    at = models.DateTimeField(db_index=True)
    path = models.CharField(max_length=100)
    token_prefix = models.CharField(max_length=16, blank=True)
    source = models.CharField(max_length=128, blank=True)  # "" when the body named none
    status = models.PositiveSmallIntegerField()  # the HTTP status answered (200: partial)
    received = models.PositiveIntegerField(default=0)  # events or spans in the request
    rejected = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list)  # the first 10: {index, field, message}

    class Meta:
        ordering = ["-at", "-pk"]
