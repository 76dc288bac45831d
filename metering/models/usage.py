from django.db import models

from metering.models.factory import Deployment
from portal import clock
from portal.models import Tenant

# Upper edges (ms) of the end-to-end latency histogram kept in rollups; the last bucket is +Inf.
LATENCY_BUCKETS_MS = (
    100,
    250,
    500,
    750,
    1000,
    1500,
    2000,
    3000,
    5000,
    7500,
    10000,
    15000,
    20000,
    30000,
    60000,
)


class EventKey(models.Model):
    """The idempotency key of a usage event: (source, id) → payload hash. Unpartitioned, so
    uniqueness holds across every monthly partition; inserted first in the ingest transaction."""

    source = models.CharField(max_length=128)
    event_id = models.CharField(max_length=128)
    payload_hash = models.CharField(max_length=32)
    received_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "event_id"], name="event_key_unique")
        ]


class UsageEvent(models.Model):
    """Requests served (one, or `requests` alike): tokens in and out, latencies, status. `id` is
    its EventKey's id.

    On PostgreSQL the table is partitioned by month of `time` (primary key (id, time));
    rows are only ever inserted."""

    class Status(models.TextChoices):
        OK = "ok"
        ERROR = "error"

    id = models.BigIntegerField(primary_key=True)
    time = models.DateTimeField()  # request end
    tenant = models.ForeignKey(
        Tenant, on_delete=models.PROTECT, db_constraint=False, db_index=False
    )
    deployment = models.ForeignKey(
        Deployment, on_delete=models.PROTECT, db_constraint=False, db_index=False
    )
    input_tokens = models.BigIntegerField()
    cached_tokens = models.BigIntegerField()
    output_tokens = models.BigIntegerField()
    ttft_ms = models.FloatField(null=True)
    tpot_ms = models.FloatField(null=True)
    latency_ms = models.FloatField(null=True)
    is_error = models.BooleanField(default=False)
    # Requests of this outcome the event stands for (pre-aggregated or sampled records): the
    # tokens are their totals, the latencies their means; the rollups count it that many times.
    # The column defaults to 1 in the database too, for writers that leave it out (COPY).
    requests = models.PositiveIntegerField(default=1, db_default=1)

    class Meta:
        indexes = [models.Index(fields=["tenant", "deployment", "time"], name="usage_cell_idx")]


class RollupPending(models.Model):
    """Work queue: an hour of a (tenant, deployment) whose rollup must be recomputed. Written in
    the ingest transaction, claimed and deleted by the rollup job in its own transaction."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, db_constraint=False)
    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, db_constraint=False)
    hour = models.DateTimeField()
    # When the usage arrived: everything queued before the oldest pending row is folded, so
    # usage is metered until then (kpis.md section 0, data_until).
    queued_at = models.DateTimeField(default=clock.now)


class ChangedHour(models.Model):
    """An hour whose metered figures changed after they were stored: its usage folded again,
    or a capacity sample stored for it. Written in the transaction of the change, claimed and
    deleted by the measure job, which reopens the closed KPI snapshots the hour changes
    (kpis.md section 6): a queue, not a time watermark, so a change whose transaction
    commits late is not skipped. An hour may stand in it more than once."""

    hour = models.DateTimeField()


class FoldMark(models.Model):
    """When the usage fold last completed with nothing pending: usage is metered until then
    (kpis.md section 0, data_until), so a fold that stopped reads as a lag, not as idle
    GPUs. One row, upserted by the fold."""

    completed_at = models.DateTimeField()


class UsageRollup(models.Model):
    """Sums of the usage events of one tenant and deployment over one period (abstract)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE)
    requests = models.BigIntegerField(default=0)  # every request, failed ones included
    errors = models.BigIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)  # all requests (production counts them)
    cached_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    ok_input_tokens = models.BigIntegerField(default=0)  # status ok only (billable)
    ok_cached_tokens = models.BigIntegerField(default=0)
    ok_output_tokens = models.BigIntegerField(default=0)
    compliant_requests = models.BigIntegerField(default=0)  # ok and within the SLO in force
    compliant_input_tokens = models.BigIntegerField(default=0)
    compliant_cached_tokens = models.BigIntegerField(default=0)
    compliant_output_tokens = models.BigIntegerField(default=0)
    ttft_ms_sum = models.FloatField(default=0)
    ttft_count = models.BigIntegerField(default=0)
    tpot_ms_sum = models.FloatField(default=0)
    tpot_count = models.BigIntegerField(default=0)
    latency_ms_sum = models.FloatField(default=0)
    latency_count = models.BigIntegerField(default=0)
    # Non-cumulative counts per LATENCY_BUCKETS_MS bucket (+Inf last).
    latency_histogram = models.JSONField(default=list)
    is_demo = models.BooleanField(default=False)  # written by the demo, not from events

    class Meta:
        abstract = True


class HourlyUsage(UsageRollup):
    """Usage of a tenant on a deployment during one UTC hour."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "deployment", "hour"], name="hourly_unique")
        ]
        indexes = [models.Index(fields=["hour"], name="hourly_hour_idx")]


class DailyUsage(UsageRollup):
    """Usage of a tenant on a deployment during one UTC day (the sum of its hours)."""

    day = models.DateField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "deployment", "day"], name="daily_unique")
        ]
        indexes = [models.Index(fields=["day"], name="daily_day_idx")]
