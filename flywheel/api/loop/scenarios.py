"""POST /api/v1/flywheel/scenarios: a measured period projected with levers and targets."""

from __future__ import annotations

from decimal import Decimal

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from flywheel.api.loop.writes import ERRORS, RATIO
from flywheel.domain.loop.demand import DEMANDS, GROWTH_MAX, GROWTH_MIN, Demand
from flywheel.domain.loop.factors import FACTORS, target_refusal
from flywheel.domain.loop.goals import GoalSpec
from flywheel.domain.loop.levers import ESTIMATES
from flywheel.selectors.kpis import empty_reason_of
from flywheel.selectors.loop.baseline import BASELINE_KEY
from flywheel.selectors.loop.scenarios import scenario_get
from flywheel.selectors.loop.shapes import rfc3339
from flywheel.selectors.measurement import FACTORY
from metering.selectors.usage import window_resolve
from portal import clock
from portal.access import Capability
from portal.api.fields import MoneyField
from portal.errors import FieldError
from portal.models import Scope
from portal.permissions import capability_permission

MULTIPLIER = {"max_digits": 12, "decimal_places": 6, "min_value": Decimal("0.000001")}


class GoalInSerializer(serializers.Serializer):
    min_gross_margin = serializers.DecimalField(
        max_digits=9, decimal_places=6, max_value=Decimal(1), required=False, allow_null=True
    )
    min_ebitda_per_month = MoneyField(
        signed=True, decimal_places=4, required=False, allow_null=True
    )
    min_tfi = serializers.DecimalField(
        **RATIO, max_value=Decimal(1), required=False, allow_null=True
    )


class ScenarioSerializer(serializers.Serializer):
    """A scenario: factor targets replace the measured values, then levers multiply them."""

    # "from" is a Python keyword: declared below.
    to = serializers.CharField(
        required=False, help_text="end of the measured period: RFC 3339 or YYYY-MM-DD (excluded)"
    )
    levers = serializers.ListField(
        child=serializers.SlugField(), required=False, default=list, help_text="lever slugs"
    )
    targets = serializers.DictField(
        child=serializers.DecimalField(**MULTIPLIER),
        required=False,
        default=dict,
        help_text="factor → value (α, β, σ, s, ρ in (0, 1]; η in (0, 10])",
    )
    estimate = serializers.ChoiceField(choices=ESTIMATES, default="typical")
    demand = serializers.ChoiceField(
        choices=DEMANDS,
        default="measured",
        help_text="measured: the period's production, served as measured; growth: a 12-month "
        "series growing growth_pct_per_month; unlimited: every extra token sells",
        error_messages={"invalid_choice": f"must be one of {', '.join(DEMANDS)}"},
    )
    growth_pct_per_month = serializers.DecimalField(
        max_digits=6,
        decimal_places=2,
        min_value=GROWTH_MIN,
        max_value=GROWTH_MAX,
        required=False,
        allow_null=True,
        help_text="% per month on top of the measured demand (growth only), -50 to 100",
    )
    goal = GoalInSerializer(required=False, allow_null=True, help_text="default: the goal in force")
    baseline = serializers.RegexField(
        BASELINE_KEY,
        required=False,
        allow_blank=True,
        help_text="an opaque key the flywheel page passes to reuse its measured period",
        error_messages={
            "invalid": "not a key the flywheel page issued; leave it out to measure the period"
        },
    )

    def validate(self, attrs):
        growth = attrs.get("growth_pct_per_month")
        if attrs.get("demand") == "growth" and growth is None:
            raise serializers.ValidationError(
                {"growth_pct_per_month": "a growth demand needs its % per month"}
            )
        if attrs.get("demand") != "growth" and growth is not None:
            raise serializers.ValidationError(
                {"growth_pct_per_month": "applies to demand growth only"}
            )
        return attrs

    def validate_targets(self, value):
        for factor, target in value.items():
            if factor not in FACTORS:
                raise serializers.ValidationError(f"unknown factor {factor!r}")
            if refusal := target_refusal(factor, target):
                raise serializers.ValidationError(f"{factor}: {refusal}")
        return value


ScenarioSerializer._declared_fields["from"] = serializers.CharField(
    required=False,
    help_text="start of the measured period: RFC 3339 or YYYY-MM-DD (default: this month)",
)


class ScenarioView(APIView):
    """Project every KPI and TFOM figure of a measured period with levers (multipliers of
    several levers on one factor multiply; α, β, σ, s, ρ capped at 1; GPUs withdrawn) or
    direct factor targets, under a stated demand (measured by default, growth, unlimited;
    echoed as `demand`); check the goal (typical multipliers) and, when unmet, propose the
    cheapest lever set (one-time + 12 × monthly cost) that meets it under that demand, or
    say none does."""

    # Operators and finance run scenarios (a computation: a `read` token may); investors read
    # the factory but do not run them.
    permission_classes = [
        capability_permission(read=Capability.READ_FACTORY, write=Capability.RUN_SCENARIOS)
    ]
    write_scope = Scope.READ  # changes nothing

    @extend_schema(
        request=ScenarioSerializer,
        responses={200: OpenApiTypes.OBJECT, 400: ERRORS, 403: ERRORS},
    )
    def post(self, request):
        body = ScenarioSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        window = window_resolve({k: data[k] for k in ("from", "to") if data.get(k)})
        if reason := empty_reason_of(window=window, scope=FACTORY):
            raise FieldError(
                "from",
                f"not enough data: nothing is measured in [{rfc3339(window.start)}, "
                f"{rfc3339(window.to)}) ({reason}); choose an earlier period",
            )
        period = window.period
        goal = data.get("goal")
        result = scenario_get(
            start=period.start,
            end=period.end,
            lever_slugs=data["levers"],
            targets=dict(data["targets"]),
            estimate=data["estimate"],
            goal=None if goal is None else GoalSpec(**goal),
            baseline_key=data.get("baseline") or "",
            demand=Demand(
                kind=data["demand"], growth_pct_per_month=data.get("growth_pct_per_month")
            ),
            now=clock.now(),
        )
        return Response(result)
