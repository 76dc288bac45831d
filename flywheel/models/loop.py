from django.conf import settings
from django.db import models
from django.db.models import Q

from flywheel.domain.kpis import KPI
from flywheel.domain.loop.factors import FACTORS
from portal.models import EffectiveDated
from portal.periods import validate_whole_hour

# The six factors of TFI = α·β·η·σ·s·ρ (kpis.md sections 2-3), named as declared.
Factor = models.TextChoices(
    "Factor", [(factor.upper(), (factor, KPI[factor].row_label)) for factor in FACTORS]
)


class Lever(EffectiveDated):
    """One version of a lever: what it moves (factor → low/typical/high multipliers), what
    it costs, and where its defaults come from, in force from `effective_from` (a whole UTC
    hour) until the next version of the same slug. Create-only once in force: a change, or
    what a cycle learned, is a new version. `is_active` False retires the lever."""

    audit_type = "lever"

    class Source(models.TextChoices):
        PUBLISHED = "published", "published uplift"
        OPERATOR = "operator", "set by an operator"
        LEARNED = "learned", "blended with realized uplift"

    slug = models.SlugField(max_length=64)  # the lever; every version shares it
    name = models.CharField(max_length=200)
    # How it works and the published source of each default multiplier.
    description = models.TextField()
    # {"efficiency": {"low": "2", "typical": "2.5", "high": "4"}}: multipliers as strings
    effects = models.JSONField()
    one_time_cost = models.DecimalField(max_digits=20, decimal_places=4)  # money
    monthly_cost = models.DecimalField(max_digits=20, decimal_places=4)  # money per month
    currency = models.CharField(max_length=3)
    is_active = models.BooleanField(default=True)
    # Where it acts: the factory (neither set), one pool, or one deployment (its pool, by
    # the deployment's share of the pool's production in the period a scenario projects).
    pool = models.ForeignKey(
        "metering.Pool", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    deployment = models.ForeignKey(
        "metering.Deployment", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # GPUs of its pool the lever takes out of service (retiring the lever is is_active).
    gpus_withdrawn = models.PositiveIntegerField(default=0)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.OPERATOR)
    # Realized multipliers folded into `typical` so far (the prior counts as one more).
    observations = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["slug", "effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["slug", "effective_from"], name="lever_version_unique"),
            models.CheckConstraint(
                condition=Q(one_time_cost__gte=0) & Q(monthly_cost__gte=0),
                name="lever_costs_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(pool__isnull=True) | Q(deployment__isnull=True),
                name="lever_one_scope",
            ),
        ]

    @property
    def scope_pool(self):
        """The pool it acts in (a deployment's), or None factory-wide."""
        return self.deployment.pool if self.deployment_id else self.pool

    def __str__(self) -> str:
        return f"{self.slug} from {self.effective_from:%Y-%m-%d %H:00}"


class Goal(EffectiveDated):
    """The factory's goal in force from `effective_from` (a whole UTC hour) until the next:
    gross margin ≥ X, EBITDA ≥ Y per month, TFI ≥ Z (each optional, at least one set), and
    optional factor targets replacing the kpis.md defaults in the diagnosis. Create-only
    once in force."""

    audit_type = "goal"

    min_gross_margin = models.DecimalField(  # ratio: 0.55 = 55%
        max_digits=9, decimal_places=6, null=True, blank=True
    )
    min_ebitda_per_month = models.DecimalField(  # money per month
        max_digits=20, decimal_places=4, null=True, blank=True
    )
    min_tfi = models.DecimalField(max_digits=9, decimal_places=6, null=True, blank=True)  # ratio
    # {"occupancy": "0.80"}: factor → target, overriding the defaults (kpis.md section 6)
    factor_targets = models.JSONField(default=dict, blank=True)
    note = models.CharField(max_length=200, blank=True)
    currency = models.CharField(max_length=3)
    effective_from = models.DateTimeField(unique=True, validators=[validate_whole_hour])
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["effective_from"]
        constraints = [
            models.CheckConstraint(
                condition=Q(min_gross_margin__isnull=False)
                | Q(min_ebitda_per_month__isnull=False)
                | Q(min_tfi__isnull=False),
                name="goal_has_a_criterion",
            )
        ]

    def __str__(self) -> str:
        return f"goal from {self.effective_from:%Y-%m-%d %H:00}"


class Cycle(models.Model):
    """One turn of the flywheel over a measured period [period_start, period_end): its
    figures, the ranked diagnosis, the goal check and the proposed levers. Upserted on the
    period by the weekly job (running it twice rewrites the same row)."""

    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    ran_at = models.DateTimeField()
    figures = models.JSONField(default=dict)  # the keys of GET /api/v1/tfom
    diagnosis = models.JSONField(default=list)  # ranked factors: gains, targets, evidence
    bottleneck = models.CharField(max_length=32, blank=True)  # a Factor, "" when none
    goal = models.ForeignKey(Goal, null=True, blank=True, on_delete=models.PROTECT)
    goal_check = models.JSONField(default=list, blank=True)  # criteria: required, actual, met
    is_goal_met = models.BooleanField(null=True)  # None: no goal in force
    proposal = models.JSONField(null=True, blank=True)  # the cheapest lever set, or why none
    error = models.TextField(blank=True)  # why the period could not be measured

    class Meta:
        ordering = ["-period_start"]
        constraints = [
            models.UniqueConstraint(fields=["period_start", "period_end"], name="cycle_period")
        ]

    def __str__(self) -> str:
        return f"cycle {self.period_start:%Y-%m-%d} – {self.period_end:%Y-%m-%d}"


class LeverApplication(models.Model):
    """An operator's record that a lever went into service at `applied_at`, with what the
    projection expected: the factors measured over the period before it and the version's
    typical multipliers. The first cycle whose period starts at or after `applied_at`
    measures what was realized and blends it into the lever's typical multiplier."""

    lever = models.ForeignKey(Lever, on_delete=models.PROTECT, related_name="applications")
    applied_at = models.DateTimeField()
    note = models.CharField(max_length=200, blank=True)
    baseline_start = models.DateTimeField()
    baseline_end = models.DateTimeField()
    baseline_factors = models.JSONField(default=dict)  # factor → measured before (string)
    projected = models.JSONField(default=dict)  # factor → typical multiplier applied (string)
    # The demand the projection assumed: under the measured one, occupancy follows the
    # busy time the same production needs (never learned from), an unlimited one sells
    # every token the levers add.
    demand = models.CharField(
        max_length=16,
        choices=[("measured", "measured demand"), ("unlimited", "unlimited demand")],
        default="measured",
    )
    evaluated_by = models.ForeignKey(
        Cycle, null=True, blank=True, on_delete=models.SET_NULL, related_name="evaluations"
    )
    # factor → {"before", "projected", "after", "projected_uplift", "realized_uplift",
    # "realized_multiplier", "prior_typical", "updated_typical"} (decimal strings)
    realized = models.JSONField(default=dict, blank=True)
    updated_lever = models.ForeignKey(
        Lever, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )  # the learned version the evaluation created
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-applied_at", "-id"]

    def __str__(self) -> str:
        return f"{self.lever.slug} applied {self.applied_at:%Y-%m-%d %H:%M}"
