"""Engine and GPU telemetry from Prometheus scrapes and pushes (vLLM, SGLang, dcgm-exporter).

Engine counters feed reconciliation, latency charts and checks, never the KPIs
(kpis.md §1). Only hourly aggregates are kept: counters are stored as the increase
observed in each UTC hour (reset-aware, data-formats.md §0 and §8.8), histograms as the
summed bucket increases with their edges, gauges as the last values seen.
"""

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import models

from metering.models.factory import Deployment, Pool


def validate_scrape_url(value: str) -> None:
    """An http(s) URL with a host. Cluster-internal names without a dot (`vllm-0:8000`) are
    fine, which Django's URLValidator would refuse."""
    try:
        parts = urlsplit(value)
        has_host = bool(parts.hostname)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as error:
        raise ValidationError(f"is not a valid URL: {error}") from error
    if parts.scheme not in ("http", "https") or not has_host:
        raise ValidationError("must be an http:// or https:// URL with a host")
    if any(c.isspace() for c in value):
        raise ValidationError("must not contain spaces")


class TelemetryKind(models.TextChoices):
    """Which exporter a scrape or push comes from; decides how its text is read."""

    VLLM = "vllm", "vLLM"
    SGLANG = "sglang", "SGLang"
    DYNAMO = "dynamo", "Dynamo"
    DCGM = "dcgm", "dcgm-exporter"


class ScrapeTarget(models.Model):
    """A `/metrics` URL scraped every 30 s; `state` holds the previous cumulative values.

    Engine targets (vLLM, SGLang) attribute every model of the scrape to `deployment`
    when it is set, else resolve each `model_name` through the aliases and slugs of the
    served models on `pool`. DCGM targets have no deployment.
    """

    class Status(models.TextChoices):
        NEVER = "never", "never scraped"
        OK = "ok", "ok"
        FAILED = "failed", "failed"

    # One target per URL, so that no exposition is counted twice.
    url = models.CharField(max_length=500, unique=True, validators=[validate_scrape_url])
    kind = models.CharField(max_length=8, choices=TelemetryKind.choices)
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="scrape_targets")
    deployment = models.ForeignKey(
        Deployment,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="scrape_targets",
    )
    enabled = models.BooleanField(default=True)
    timeout_s = models.PositiveSmallIntegerField(default=5)  # s, per socket operation; 1-20
    last_scraped_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_status = models.CharField(
        max_length=8, choices=Status.choices, default=Status.NEVER, editable=False
    )
    last_error = models.TextField(blank=True, editable=False)
    consecutive_failures = models.PositiveIntegerField(default=0, editable=False)
    # [{"family", "reason"}] of the last successful scrape, and its model names not resolved.
    last_skipped = models.JSONField(default=list, blank=True, editable=False)
    last_unknown_models = models.JSONField(default=list, blank=True, editable=False)
    # Previous cumulative values per engine replica (vLLM `engine`, SGLang `dp_rank`) or per
    # GPU, for reset-aware deltas. Not editable, so it stays out of forms and the audit log.
    state = models.JSONField(default=dict, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pool", "url"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(kind="dcgm") | models.Q(deployment__isnull=True),
                name="scrape_target_dcgm_has_no_deployment",
            ),
            models.CheckConstraint(
                condition=models.Q(timeout_s__gte=1) & models.Q(timeout_s__lte=20),
                name="scrape_target_timeout_1_to_20_s",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.url}"


class TelemetryPushState(models.Model):
    """Previous cumulative values of pushed expositions, per (pool, kind, source).

    `source` names the pushing process (default "default"): two engines pushing to the
    same pool must use distinct sources, as their replica labels would collide.
    """

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="telemetry_push_states")
    kind = models.CharField(max_length=8, choices=TelemetryKind.choices)
    source = models.CharField(max_length=128, default="default")
    state = models.JSONField(default=dict, blank=True)
    last_pushed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pool", "kind", "source"], name="telemetry_push_state_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.pool} {self.kind} {self.source}"


class EngineHourly(models.Model):
    """Engine counters of one deployment in one UTC hour, summed over every replica and source.

    Counters are increases (a restarted replica counts from zero, a first observation is a
    baseline and adds nothing). Histograms are JSON `{"le": ["0.1", ..., "+Inf"],
    "cumulative": [...], "sum": s, "count": n}` in seconds, their edges as the engine
    exposed them; `{}` when none was exposed.
    """

    deployment = models.ForeignKey(
        Deployment, on_delete=models.CASCADE, related_name="engine_hours"
    )
    hour = models.DateTimeField()  # UTC, whole hour: the delta is attributed to its scrape's hour
    intervals = models.PositiveIntegerField(default=0)  # scrape intervals counted (no baselines)
    prompt_tokens = models.BigIntegerField(default=0)  # incl. prefix-cache hits
    generation_tokens = models.BigIntegerField(default=0)
    cached_prompt_tokens = models.BigIntegerField(default=0)
    requests = models.BigIntegerField(default=0)  # finished requests, aborted included
    aborted_requests = models.BigIntegerField(default=0)
    requests_by_reason = models.JSONField(default=dict)  # vLLM finished_reason -> requests
    ttft_histogram = models.JSONField(default=dict)  # s
    tpot_histogram = models.JSONField(default=dict)  # s
    tpot_family = models.CharField(max_length=100, blank=True)  # per-request mean or ITL fallback
    # Latest gauges: per source {"running_requests", "waiting_requests", "kv_cache_usage",
    # "observed_at"}; the three fields below are their sums (KV usage: mean).
    gauges = models.JSONField(default=dict)
    running_requests = models.FloatField(null=True)  # requests
    waiting_requests = models.FloatField(null=True)  # requests
    kv_cache_usage = models.FloatField(null=True)  # fraction 0-1
    last_observed_at = models.DateTimeField(null=True)

    class Meta:
        ordering = ["deployment", "hour"]
        constraints = [
            models.UniqueConstraint(fields=["deployment", "hour"], name="engine_hourly_unique")
        ]
        indexes = [models.Index(fields=["hour"], name="engine_hourly_hour_idx")]

    def __str__(self) -> str:
        return f"{self.deployment} {self.hour:%Y-%m-%d %H:00}"


class GpuHourly(models.Model):
    """DCGM telemetry of one GPU (or MIG instance) of a pool in one UTC hour.

    Gauges are summed with their sample counts (mean = sum / samples); energy is the
    reset-aware increase of DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ) in J. Per-pool
    aggregates (GPUs seen, mean utilisation and power, energy) come from the selectors.
    """

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="gpu_hours")
    hour = models.DateTimeField()  # UTC, whole hour
    gpu_key = models.CharField(max_length=200)  # UUID[/GPU_I_ID], else hostname:gpu
    gpu = models.CharField(max_length=16, blank=True)  # device index on its host
    uuid = models.CharField(max_length=100, blank=True)
    model_name = models.CharField(max_length=100, blank=True)  # modelName
    hostname = models.CharField(max_length=200, blank=True)
    pod = models.CharField(max_length=200, blank=True)
    namespace = models.CharField(max_length=200, blank=True)
    samples = models.PositiveIntegerField(default=0)  # scrapes that showed this GPU
    utilisation_samples = models.PositiveIntegerField(default=0)
    utilisation_pct_sum = models.FloatField(default=0)  # % 0-100, summed over samples
    power_samples = models.PositiveIntegerField(default=0)
    power_w_sum = models.FloatField(default=0)  # W, summed over samples
    energy_j = models.DecimalField(max_digits=20, decimal_places=3, default=0)  # J increase
    xid_last_code = models.IntegerField(null=True)  # code of the last XID, not a count
    xid_changes = models.PositiveIntegerField(default=0)  # times a new non-zero code appeared
    last_observed_at = models.DateTimeField(null=True)

    class Meta:
        ordering = ["pool", "hour", "gpu_key"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "hour", "gpu_key"], name="gpu_hourly_unique")
        ]
        indexes = [models.Index(fields=["hour"], name="gpu_hourly_hour_idx")]

    def __str__(self) -> str:
        return f"{self.pool} {self.gpu_key} {self.hour:%Y-%m-%d %H:00}"

    @property
    def utilisation_pct_mean(self) -> float | None:
        return (
            self.utilisation_pct_sum / self.utilisation_samples
            if self.utilisation_samples
            else None
        )

    @property
    def power_w_mean(self) -> float | None:
        return self.power_w_sum / self.power_samples if self.power_samples else None


class OtlpHourly(models.Model):
    """The GenAI token-usage metrics a source exported over OTLP for a deployment in one UTC
    hour (data-formats.md 6b, "Metrics"): their own telemetry kind, per source, never summed
    with scraped engine counters; reconciliation shows them beside those, or in their place
    where a deployment has no scraped counters."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="otlp_hours")
    hour = models.DateTimeField()
    source = models.CharField(max_length=128)  # "otlp:" + service.name
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    points = models.PositiveIntegerField(default=0)  # data points counted (baselines excluded)
    # Server latency histograms exported with them (s, the form EngineHourly keeps).
    ttft_histogram = models.JSONField(default=dict)
    tpot_histogram = models.JSONField(default=dict)
    last_observed_at = models.DateTimeField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["deployment", "hour", "source"], name="otlp_hourly_unique"
            )
        ]


class OtlpMetricState(models.Model):
    """The last value of each cumulative OTLP series of a source, to take increases from;
    locked while an export of the source is stored."""

    source = models.CharField(max_length=128, unique=True)
    state = models.JSONField(default=dict)
