from django.db import models

from metering.models.factory import Deployment, Pool
from portal.models import Tenant


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

    On PostgreSQL the table is partitioned by month of `time`, and its only index is a BRIN
    index over (id, time) (migration 0013: no primary key nor usage_cell_idx there, which
    SQLite keeps); rows are only ever inserted."""

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
    input_tokens = models.BigIntegerField()  # cached and cache-write included
    cached_tokens = models.BigIntegerField()
    output_tokens = models.BigIntegerField()  # reasoning included
    # Token classes inside the counts above (kpis.md section 3); 0 in the database too, for
    # the events stored before they were metered.
    cache_write_tokens = models.BigIntegerField(default=0, db_default=0)
    reasoning_tokens = models.BigIntegerField(default=0, db_default=0)
    ttft_ms = models.FloatField(null=True)
    tpot_ms = models.FloatField(null=True)
    latency_ms = models.FloatField(null=True)
    is_error = models.BooleanField(default=False)
    # Requests of this outcome the event stands for (pre-aggregated or sampled records): the
    # tokens are their totals, the latencies their means; the rollups count it that many times.
    # The column defaults to 1 in the database too, for writers that leave it out (COPY).
    requests = models.PositiveIntegerField(default=1, db_default=1)
    # The tenant's project (portal.Project's id; kpis.md 3e), 0 for its `(none)`: no
    # constraint, so a COPY of events needs no check per row (0 names no row).
    project_id = models.BigIntegerField(default=0, db_default=0)
    # The tier it was served at (kpis.md section 3, "Service tiers"); the events stored before
    # tiers existed were standard.
    service_tier = models.CharField(max_length=8, default="standard", db_default="standard")

    class Meta:
        indexes = [models.Index(fields=["tenant", "deployment", "time"], name="usage_cell_idx")]


class FoldPending(models.Model):
    """The fold's work queue: the events one ingest transaction stored (a batch, or each
    EVENT_ID_BLOCK of a larger one), not yet added to the rollups. Written in that
    transaction, claimed (deleted) by the fold in the transaction that adds the events' sums,
    so each event is folded exactly once, whenever its transaction commits. The batch's ids
    are a block no other batch's are in (metering.services.usage.store), so the row names
    its events as a range of ids; their times bound the partitions the fold reads."""

    first_id = models.BigIntegerField(primary_key=True)  # UsageEvent.id of the run's first
    last_id = models.BigIntegerField()  # and its last (inclusive)
    time_min = models.DateTimeField()  # the earliest event time of the run
    time_max = models.DateTimeField()  # and the latest
    events = models.PositiveIntegerField()  # how many events the run holds
    queued_at = models.DateTimeField()  # when they were accepted: data_until (kpis.md section 0)


class RefoldPending(models.Model):
    """Hours of a deployment whose rollups must be folded again from raw events (a new SLO in
    force over hours already folded): only hours of months whose raw events are complete
    are ever queued (metering.services.usage.changes)."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, db_constraint=False)
    start = models.DateTimeField()
    end = models.DateTimeField(null=True)  # exclusive; None: up to the newest event


class IncompleteRawMonth(models.Model):
    """A UTC month of a pool whose raw usage events are not all stored (part of it was loaded
    as rollups, or its events were archived): its rollups can never be folded again from
    raw events, so nothing that would need it is accepted (architecture.md "The pipeline")."""

    class Reason(models.TextChoices):
        LOADED = "loaded", "loaded as rollups"
        ARCHIVED = "archived", "raw events archived"

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE)
    month = models.DateTimeField()  # first instant of the UTC month
    reason = models.CharField(max_length=16, choices=Reason.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pool", "month"], name="incomplete_raw_month")
        ]


class UsageChange(models.Model):
    """Metering's change log (portal.pipeline, "metering.usage"): what changed in the figures
    metering publishes, appended in the transaction of the change, read by billing's rating
    and flywheel's measurement past their own cursors. `usage`: a tenant's rollups of one
    pool in one hour; `capacity`: a pool's capacity samples from `start`; `version`: a
    deployment version's R_ref, w_in or SLO from `start`."""

    class Kind(models.TextChoices):
        USAGE = "usage"
        CAPACITY = "capacity"
        VERSION = "version"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, db_constraint=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, db_constraint=False)
    start = models.DateTimeField()  # a whole UTC hour
    end = models.DateTimeField(null=True)  # exclusive; None: up to now

    class Meta:
        indexes = [
            # A pool's last capacity change (capacity_stamp), read for every capacity chart
            # while the log holds a backlog of usage entries.
            models.Index(
                fields=["pool", "id"],
                condition=models.Q(kind="capacity"),
                name="usagechange_capacity_pool",
            )
        ]


class FoldMark(models.Model):
    """When the usage fold last completed with nothing pending: usage is metered until then
    (kpis.md section 0, data_until), so a fold that stopped reads as a lag, not as idle
    GPUs. One row, upserted by the fold."""

    completed_at = models.DateTimeField()


class UsageRollup(models.Model):
    """Sums of the usage events of one tenant's project and deployment at one service tier
    over one period (abstract)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    # The tenant's project (portal.Project's id), 0 for its `(none)` (as UsageEvent's).
    project_id = models.BigIntegerField(default=0, db_default=0)
    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE)
    service_tier = models.CharField(max_length=8, default="standard")
    requests = models.BigIntegerField(default=0)  # every request, failed ones included
    errors = models.BigIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)  # all requests (production counts them)
    cached_tokens = models.BigIntegerField(default=0)
    cache_write_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    reasoning_tokens = models.BigIntegerField(default=0)
    ok_input_tokens = models.BigIntegerField(default=0)  # status ok only (billable)
    ok_cached_tokens = models.BigIntegerField(default=0)
    ok_cache_write_tokens = models.BigIntegerField(default=0)
    ok_output_tokens = models.BigIntegerField(default=0)
    ok_reasoning_tokens = models.BigIntegerField(default=0)
    # ok and within the SLO in force: what production (tok) weighs, so no finer classes
    compliant_requests = models.BigIntegerField(default=0)
    compliant_input_tokens = models.BigIntegerField(default=0)
    compliant_cached_tokens = models.BigIntegerField(default=0)
    compliant_output_tokens = models.BigIntegerField(default=0)
    ttft_ms_sum = models.FloatField(default=0)
    ttft_count = models.BigIntegerField(default=0)
    tpot_ms_sum = models.FloatField(default=0)
    tpot_count = models.BigIntegerField(default=0)
    latency_ms_sum = models.FloatField(default=0)
    latency_count = models.BigIntegerField(default=0)
    # Non-cumulative counts per LATENCY_BUCKETS_MS bucket (+Inf last). The columns are
    # metering.domain.usage.rollup's SUM_FIELDS: the fold adds to them.
    latency_histogram = models.JSONField(default=list)
    is_demo = models.BooleanField(default=False)  # written by the demo, not from events

    class Meta:
        abstract = True


class HourlyUsage(UsageRollup):
    """Usage of a tenant's project on a deployment at one tier during one UTC hour."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "deployment", "service_tier", "hour", "project_id"],
                name="hourly_unique",
            )
        ]
        indexes = [models.Index(fields=["hour"], name="hourly_hour_idx")]


class RollupDelta(UsageRollup):
    """What one fold (or refold) changed in one hourly rollup row after the published cut
    (portal.pipeline.cut_read), tagged with the last entry it appended to metering's change
    log: a read of the hour holding the window's `to` subtracts the deltas past the cut, so
    it answers as of the cut while the fold goes on adding (metering.selectors.usage). Only
    hours from the cut's own are kept, and only until the cut passes them (the fold prunes
    them)."""

    hour = models.DateTimeField()
    change = models.BigIntegerField()  # the last UsageChange id of the fold that made it

    class Meta:
        indexes = [models.Index(fields=["hour", "change"], name="rollup_delta_hour")]


class DailyUsage(UsageRollup):
    """Usage of a tenant's project on a deployment at one tier during one UTC day (the sum
    of its hours)."""

    day = models.DateField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "deployment", "service_tier", "day", "project_id"],
                name="daily_unique",
            )
        ]
        indexes = [models.Index(fields=["day"], name="daily_day_idx")]


class FiveMinuteUsage(models.Model):
    """Requests of a tenant on a deployment in one 5-minute bucket (its start), for the SLO
    burn rate (kpis.md section 3c), and the tokens of its ok requests, for a reservation's
    current rate (kpis.md 3d): written by the fold beside the hourly rollups, from the same
    events under the same SLO, and kept 8 days (FIVE_MINUTE_DAYS)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, db_constraint=False)
    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, db_constraint=False)
    bucket = models.DateTimeField()
    requests = models.BigIntegerField(default=0)
    compliant_requests = models.BigIntegerField(default=0)
    errors = models.BigIntegerField(default=0)
    ok_input_tokens = models.BigIntegerField(default=0)
    ok_cached_tokens = models.BigIntegerField(default=0)
    ok_output_tokens = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "deployment", "bucket"], name="five_minute_unique"
            )
        ]
        indexes = [models.Index(fields=["bucket"], name="five_minute_bucket_idx")]
