"""The flywheel API: diagnosis, scenarios, cycles, and the lever catalogue, goals and lever
applications (effective-dated records keyed by id, create-only once in force)."""

from __future__ import annotations

from decimal import Decimal

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.access import Capability, user_role
from portal.api.fields import AwareDateTimeField, ModelSerializer
from portal.models import Role, Scope
from portal.periods import period_from_query
from portal.permissions import TokenScopePermission, capability_permission

from ..measurement import FactoryData
from ..models import Cycle, Goal, Lever, LeverApplication
from ..scenarios import ESTIMATES, FACTORS, GoalSpec
from ..selectors_flywheel import (
    application_list,
    cycle_list,
    diagnosis_get,
    diagnosis_response,
    scenario_get,
)
from ..services.flywheel import (
    FlywheelError,
    cycle_run,
    goal_create,
    lever_application_delete,
    lever_apply,
    lever_create,
    version_delete,
)
from ..services.tfom import TfomError

FactoryWrite = capability_permission(read=Capability.READ_FACTORY, write=Capability.WRITE_FACTORY)
ERRORS = OpenApiResponse(
    OpenApiTypes.OBJECT, description='{"errors": [{"field": ..., "message": ...}]}'
)
RATIO = {"max_digits": 9, "decimal_places": 6, "min_value": Decimal(0)}
MULTIPLIER = {"max_digits": 12, "decimal_places": 6, "min_value": Decimal("0.000001")}


def _invalid(error: FlywheelError | TfomError) -> serializers.ValidationError:
    return serializers.ValidationError({error.field: [error.message]})


def _targets(value: str | None) -> dict[str, Decimal]:
    """`occupancy:0.8,efficiency:0.9` → {factor: target}."""
    targets: dict[str, Decimal] = {}
    for part in filter(None, (value or "").split(",")):
        factor, _, number = part.partition(":")
        factor = factor.strip()
        try:
            target = Decimal(number)
        except ArithmeticError:
            target = None
        if factor not in FACTORS or target is None or not target.is_finite() or target <= 0:
            raise serializers.ValidationError(
                {"targets": [f"{part!r}: use factor:value, a factor of {', '.join(FACTORS)}"]}
            )
        if factor != "efficiency" and target > 1:
            raise serializers.ValidationError({"targets": [f"{factor}: at most 1"]})
        targets[factor] = target
    return targets


class DiagnosisView(APIView):
    """Each factor α, β, η, σ, s, ρ ranked by the monthly EBITDA gained if it alone reached
    its target (kpis.md section 6), with the evidence from the data; the first with a
    positive gain is the bottleneck. Period [from, to), default this month so far."""

    permission_classes = [capability_permission(read=Capability.READ_FACTORY)]

    @extend_schema(
        parameters=[
            OpenApiParameter("from", str, description="RFC 3339 or YYYY-MM-DD"),
            OpenApiParameter("to", str, description="RFC 3339 or YYYY-MM-DD (excluded)"),
            OpenApiParameter(
                "targets",
                str,
                description="factor targets over the goal's and the defaults, e.g. "
                "occupancy:0.8,efficiency:0.9",
            ),
        ],
        responses={200: OpenApiTypes.OBJECT, 400: ERRORS, 403: ERRORS},
    )
    def get(self, request):
        period = period_from_query(request.query_params)
        targets = _targets(request.query_params.get("targets"))
        data = FactoryData(start=period.start, end=period.end)
        try:
            diagnosis = diagnosis_get(
                start=period.start, end=period.end, targets=targets, data=data
            )
        except TfomError as error:
            raise _invalid(error) from None
        return Response(diagnosis_response(diagnosis, rating_errors=data.rating_errors))


class GoalInSerializer(serializers.Serializer):
    min_gross_margin = serializers.DecimalField(
        max_digits=9, decimal_places=6, max_value=Decimal(1), required=False, allow_null=True
    )
    min_ebitda_per_month = serializers.DecimalField(
        max_digits=20, decimal_places=4, required=False, allow_null=True
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
        help_text="factor → value (α, β, σ, s, ρ in [0, 1]; η positive)",
    )
    estimate = serializers.ChoiceField(choices=ESTIMATES, default="typical")
    goal = GoalInSerializer(required=False, allow_null=True, help_text="default: the goal in force")
    baseline = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="an opaque key the flywheel page passes to reuse its measured period",
    )

    def validate_targets(self, value):
        for factor, target in value.items():
            if factor not in FACTORS:
                raise serializers.ValidationError(f"unknown factor {factor!r}")
            if factor != "efficiency" and target > 1:
                raise serializers.ValidationError(f"{factor}: at most 1")
        return value


ScenarioSerializer._declared_fields["from"] = serializers.CharField(
    required=False,
    help_text="start of the measured period: RFC 3339 or YYYY-MM-DD (default: this month)",
)


class ScenarioPermission(TokenScopePermission):
    """Operators and finance run scenarios (a computation: a `read` token may)."""

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if not super().has_permission(request, view):
            return False
        self.message = "Your role may not do this."
        return user_role(request.user) in (Role.OPERATOR, Role.FINANCE)


class ScenarioView(APIView):
    """Project every KPI and TFOM figure of a measured period with levers (multipliers of
    several levers on one factor multiply; α, β, σ, s, ρ capped at 1) or direct factor
    targets; check the goal (typical multipliers) and, when unmet, propose the cheapest
    lever set (one-time + 12 × monthly cost) that meets it, or say none does."""

    permission_classes = [ScenarioPermission]
    write_scope = Scope.READ  # changes nothing

    @extend_schema(
        request=ScenarioSerializer,
        responses={200: OpenApiTypes.OBJECT, 400: ERRORS, 403: ERRORS},
    )
    def post(self, request):
        body = ScenarioSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        period = period_from_query({k: data[k] for k in ("from", "to") if data.get(k)})
        goal = data.get("goal")
        try:
            result = scenario_get(
                start=period.start,
                end=period.end,
                lever_slugs=data["levers"],
                targets=dict(data["targets"]),
                estimate=data["estimate"],
                goal=None if goal is None else GoalSpec(**goal),
                baseline_key=data.get("baseline") or "",
                now=timezone.now(),
            )
        except (TfomError, FlywheelError) as error:
            raise _invalid(error) from None
        return Response(result)


# ---------------------------------------------------------------- catalogue, goals, cycles


class LeverSerializer(ModelSerializer):
    """A lever version: effects {factor: {low, typical, high}} multipliers, costs, source."""

    effects = serializers.JSONField(
        help_text='factor → multipliers 0 < low ≤ typical ≤ high, e.g. {"efficiency": '
        '{"low": "2", "typical": "2.5", "high": "4"}}'
    )
    one_time_cost = serializers.DecimalField(max_digits=20, decimal_places=4, min_value=Decimal(0))
    monthly_cost = serializers.DecimalField(max_digits=20, decimal_places=4, min_value=Decimal(0))
    currency = serializers.CharField(max_length=3, required=False)
    effective_from = AwareDateTimeField(help_text="a whole UTC hour")
    source = serializers.ChoiceField(choices=Lever.Source.choices, read_only=True)
    observations = serializers.IntegerField(read_only=True)

    class Meta:
        model = Lever
        fields = [
            "id",
            "slug",
            "name",
            "description",
            "effects",
            "one_time_cost",
            "monthly_cost",
            "currency",
            "is_active",
            "source",
            "observations",
            "effective_from",
        ]
        validators = []  # the service reports a duplicate version on effective_from


class GoalSerializer(ModelSerializer):
    """A goal version: gross margin ≥ X, EBITDA ≥ Y per month, TFI ≥ Z; factor targets."""

    min_gross_margin = serializers.DecimalField(
        max_digits=9, decimal_places=6, max_value=Decimal(1), required=False, allow_null=True
    )
    min_ebitda_per_month = serializers.DecimalField(
        max_digits=20, decimal_places=4, required=False, allow_null=True
    )
    min_tfi = serializers.DecimalField(
        **RATIO, max_value=Decimal(1), required=False, allow_null=True
    )
    factor_targets = serializers.JSONField(
        required=False,
        default=dict,
        help_text='factor → target replacing the kpis.md default, e.g. {"occupancy": "0.8"}',
    )
    currency = serializers.CharField(max_length=3, required=False)
    effective_from = AwareDateTimeField(help_text="a whole UTC hour")

    class Meta:
        model = Goal
        fields = [
            "id",
            "min_gross_margin",
            "min_ebitda_per_month",
            "min_tfi",
            "factor_targets",
            "note",
            "currency",
            "effective_from",
        ]


class LeverApplicationSerializer(ModelSerializer):
    """A lever put into service at `applied_at`, and what the next cycle measured."""

    lever = serializers.SlugField(source="lever.slug")
    lever_version = serializers.IntegerField(source="lever_id", read_only=True)
    evaluated_by = serializers.PrimaryKeyRelatedField(read_only=True)
    updated_lever = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = LeverApplication
        fields = [
            "id",
            "lever",
            "lever_version",
            "applied_at",
            "note",
            "baseline_start",
            "baseline_end",
            "baseline_factors",
            "projected",
            "evaluated_by",
            "realized",
            "updated_lever",
        ]
        read_only_fields = [
            "baseline_start",
            "baseline_end",
            "baseline_factors",
            "projected",
            "realized",
        ]


class CycleSerializer(ModelSerializer):
    """One turn of the flywheel: figures, ranked diagnosis, goal check, proposal, and the
    lever applications it measured."""

    evaluations = LeverApplicationSerializer(many=True, read_only=True)

    class Meta:
        model = Cycle
        fields = [
            "id",
            "period_start",
            "period_end",
            "ran_at",
            "bottleneck",
            "goal",
            "is_goal_met",
            "goal_check",
            "proposal",
            "figures",
            "diagnosis",
            "evaluations",
            "error",
        ]


class VersionViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Create-only once in force: a version is never edited, and only deleted before its
    effective_from; a change is a new version."""

    permission_classes = [FactoryWrite]

    def perform_create(self, serializer):
        try:
            serializer.instance = self.create_version(serializer.validated_data)
        except FlywheelError as error:
            raise _invalid(error) from None

    def perform_destroy(self, instance):
        try:
            version_delete(version=instance, by=self.request.user)
        except FlywheelError as error:
            raise _invalid(error) from None


@extend_schema(responses={400: ERRORS, 403: ERRORS})
class LeverViewSet(VersionViewSet):
    """The lever catalogue, every version (`?slug=` one lever's history)."""

    serializer_class = LeverSerializer
    queryset = Lever.objects.all()
    filterset_fields = {"slug": ["exact"], "source": ["exact"]}

    def create_version(self, data):
        return lever_create(**data, by=self.request.user)


@extend_schema(responses={400: ERRORS, 403: ERRORS})
class GoalViewSet(VersionViewSet):
    """Goals, effective-dated: the version in force is checked by every cycle."""

    serializer_class = GoalSerializer
    queryset = Goal.objects.all()

    def create_version(self, data):
        return goal_create(**data, by=self.request.user)


@extend_schema(responses={400: ERRORS, 403: ERRORS})
class LeverApplicationViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Levers marked applied (with the date); the next cycle measures realized against
    projected uplift and updates the lever's typical multiplier. Deletable until measured."""

    permission_classes = [FactoryWrite]
    serializer_class = LeverApplicationSerializer
    queryset = application_list()

    def perform_create(self, serializer):
        data = serializer.validated_data
        try:
            serializer.instance = lever_apply(
                slug=data["lever"]["slug"],
                applied_at=data["applied_at"],
                note=data.get("note", ""),
                by=self.request.user,
            )
        except FlywheelError as error:
            raise _invalid(error) from None

    def perform_destroy(self, instance):
        try:
            lever_application_delete(application=instance, by=self.request.user)
        except FlywheelError as error:
            raise _invalid(error) from None


class CycleRunSerializer(serializers.Serializer):
    to = serializers.CharField(required=False, help_text="RFC 3339 or YYYY-MM-DD (excluded)")


CycleRunSerializer._declared_fields["from"] = serializers.CharField(
    required=False, help_text="RFC 3339 or YYYY-MM-DD"
)


@extend_schema(responses={400: ERRORS, 403: ERRORS})
class CycleViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Flywheel cycles, newest first (the weekly job writes one per week). POST runs one
    now over [from, to) (default: the last 7 whole UTC days); running it again for the
    same period rewrites it."""

    permission_classes = [FactoryWrite]
    serializer_class = CycleSerializer
    queryset = cycle_list()

    @extend_schema(request=CycleRunSerializer, responses={201: CycleSerializer, 400: ERRORS})
    def create(self, request):
        body = CycleRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        bounds = {k: body.validated_data[k] for k in ("from", "to") if body.validated_data.get(k)}
        start = end = None
        if bounds:
            if len(bounds) == 1:
                raise serializers.ValidationError({"to": ["give both from and to, or neither"]})
            period = period_from_query(bounds)
            start, end = period.start, period.end
        try:
            cycle = cycle_run(start=start, end=end, by=request.user)
        except FlywheelError as error:
            raise _invalid(error) from None
        return Response(
            CycleSerializer(cycle_list().get(pk=cycle.pk)).data, status=status.HTTP_201_CREATED
        )
