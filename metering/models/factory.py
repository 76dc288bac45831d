from decimal import Decimal

from django.db import models

from portal.models import EffectiveDated
from portal.periods import validate_whole_hour


class Pool(models.Model):
    """A group of identical GPUs at one site; capacity and costs are kept per pool."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    gpu_type = models.CharField(max_length=64)
    gpu_count = models.PositiveIntegerField(
        help_text="Installed GPUs when no telemetry says otherwise."
    )
    site = models.CharField(max_length=100, blank=True)
    # Service life (kpis.md section 0): the pool counts calendar time, capacity and costs
    # only in [in_service_from, retired_at). Unset, in_service_from is derived from the
    # pool's first sign of life (its earliest capacity sample or rollup hour) and stored.
    # Whole hours, as the rollups it is measured by.
    in_service_from = models.DateTimeField(null=True, blank=True, validators=[validate_whole_hour])
    retired_at = models.DateTimeField(null=True, blank=True, validators=[validate_whole_hour])

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(retired_at__isnull=True)
                | models.Q(in_service_from__isnull=True)
                | models.Q(retired_at__gt=models.F("in_service_from")),
                name="pool_retired_after_in_service",
            )
        ]

    def __str__(self) -> str:
        return self.slug


class ServedModel(models.Model):
    """A model the factory sells (e.g. Llama-3.3-70B); engines may name it by an alias."""

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class ModelAlias(models.Model):
    """An engine's name for a served model (vLLM `model_name`, an OpenAI batch line's `model`)."""

    alias = models.CharField(max_length=200, unique=True)
    model = models.ForeignKey(ServedModel, on_delete=models.CASCADE, related_name="aliases")

    def __str__(self) -> str:
        return self.alias


class Deployment(models.Model):
    """A served model running on a pool; its R_ref, w_in and SLO live in effective-dated versions."""

    slug = models.SlugField(max_length=150, unique=True)
    model = models.ForeignKey(ServedModel, on_delete=models.PROTECT, related_name="deployments")
    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="deployments")

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.UniqueConstraint(fields=["model", "pool"], name="deployment_model_pool_unique")
        ]

    def __str__(self) -> str:
        return self.slug


class DeploymentVersion(EffectiveDated):
    """R_ref, w_in and SLO thresholds of a deployment, in force from `effective_from` (a whole
    UTC hour) until the next version. A version in force is never edited."""

    audit_type = "deployment_version"

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="versions")
    r_ref = models.DecimalField(max_digits=14, decimal_places=4)  # output tokens/s per GPU
    w_in = models.DecimalField(max_digits=8, decimal_places=6, default=0)  # output-token units
    slo_ttft_ms = models.PositiveIntegerField(null=True, blank=True)
    slo_tpot_ms = models.PositiveIntegerField(null=True, blank=True)
    # Tighter thresholds for `priority` requests (kpis.md section 3, "Service tiers"); unset,
    # a priority request is judged against the standard ones.
    slo_ttft_ms_priority = models.PositiveIntegerField(null=True, blank=True)
    slo_tpot_ms_priority = models.PositiveIntegerField(null=True, blank=True)
    # Optional throughput floor: requests should stream at least this many tokens/s.
    slo_min_tokens_per_s = models.PositiveIntegerField(null=True, blank=True)
    # The share of requests that must be compliant: the SLO burn rate's target (kpis.md 3c).
    slo_target = models.DecimalField(max_digits=6, decimal_places=5, default=Decimal("0.99"))
    # How r_ref was derived when it was read off a reference curve at the SLO (kpis.md 6c):
    # the curve and the front's neighbours; empty when r_ref was given.
    r_ref_derivation = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["deployment", "effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["deployment", "effective_from"], name="deployment_version_unique"
            ),
            models.CheckConstraint(condition=models.Q(r_ref__gt=0), name="r_ref_positive"),
            models.CheckConstraint(condition=models.Q(w_in__gte=0), name="w_in_non_negative"),
            models.CheckConstraint(
                condition=models.Q(slo_target__gt=0, slo_target__lt=1), name="slo_target_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.deployment} from {self.effective_from:%Y-%m-%d %H:%M}"


class ReferenceCurvePoint(models.Model):
    """A measured point of a reference curve (kpis.md 6c, data-formats.md section 9): a
    model's tok/s per GPU and per user at a concurrency, on a GPU type (kept as written: a
    pool may buy it later), tensor parallel degree and precision. Rates are on the point's
    `token_basis`; an import replaces the points of every curve it names."""

    class Basis(models.TextChoices):
        OUTPUT = "output"
        TOTAL = "total"

    model = models.ForeignKey(ServedModel, on_delete=models.CASCADE, related_name="curve_points")
    gpu_type = models.CharField(max_length=64)
    tp = models.PositiveIntegerField()
    precision = models.CharField(max_length=32)
    concurrency = models.PositiveIntegerField()
    tok_s_per_gpu = models.DecimalField(max_digits=20, decimal_places=6)
    tok_s_per_user = models.DecimalField(max_digits=20, decimal_places=6)
    token_basis = models.CharField(max_length=8, choices=Basis.choices)
    isl = models.PositiveIntegerField()  # the workload's mean input length
    osl = models.PositiveIntegerField()  # and output length
    ttft_p50_ms = models.DecimalField(max_digits=20, decimal_places=6, null=True, blank=True)
    source = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["model", "gpu_type", "tp", "precision", "concurrency"]
        constraints = [
            models.UniqueConstraint(
                fields=["model", "gpu_type", "tp", "precision", "concurrency"],
                name="curve_point_unique",
            ),
            models.CheckConstraint(
                condition=models.Q(tok_s_per_gpu__gt=0, tok_s_per_user__gt=0, tp__gt=0),
                name="curve_point_rates_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model} {self.gpu_type} tp{self.tp} {self.precision} c{self.concurrency}"


class CapacitySample(models.Model):
    """GPU capacity of a pool at a time: installed ≥ healthy ≥ busy. Holds until the next sample
    (or for `interval_s`). Keyed by (pool, time): posting one again replaces it."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="capacity_samples")
    time = models.DateTimeField()
    interval_s = models.PositiveIntegerField(null=True, blank=True)
    gpus_installed = models.PositiveIntegerField()
    gpus_healthy = models.PositiveIntegerField()
    gpus_busy = models.PositiveIntegerField()
    power_w = models.DecimalField(max_digits=14, decimal_places=3, null=True, blank=True)

    class Meta:
        ordering = ["pool", "time"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "time"], name="capacity_pool_time_unique"),
            models.CheckConstraint(
                condition=models.Q(gpus_healthy__lte=models.F("gpus_installed"))
                & models.Q(gpus_busy__lte=models.F("gpus_healthy")),
                name="capacity_busy_le_healthy_le_installed",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pool} @ {self.time:%Y-%m-%d %H:%M}"
