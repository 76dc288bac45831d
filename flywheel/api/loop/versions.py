"""The lever catalogue and goals: effective-dated versions, create-only once in force."""

from __future__ import annotations

from decimal import Decimal

from rest_framework import serializers

from flywheel.api.loop.writes import RATIO, FactoryVersionViewSet
from flywheel.filters import LeverFilterSet
from flywheel.models import Goal, Lever
from flywheel.services.loop.versions import goal_create, lever_create
from metering.selectors.factory import deployment_list, pool_list
from portal.api.fields import AwareDateTimeField, ModelSerializer, MoneyField


class LeverSerializer(ModelSerializer):
    """A lever version: effects {factor: {low, typical, high}} multipliers, costs, source."""

    effects = serializers.JSONField(
        help_text='factor → multipliers 0 < low ≤ typical ≤ high, e.g. {"efficiency": '
        '{"low": "2", "typical": "2.5", "high": "4"}}'
    )
    one_time_cost = MoneyField(decimal_places=4)
    monthly_cost = MoneyField(decimal_places=4)
    currency = serializers.CharField(max_length=3, required=False)
    effective_from = AwareDateTimeField(help_text="a whole UTC hour")
    source = serializers.ChoiceField(choices=Lever.Source.choices, read_only=True)
    observations = serializers.IntegerField(read_only=True)
    pool = serializers.SlugRelatedField(
        slug_field="slug",
        queryset=pool_list(),
        required=False,
        allow_null=True,
        help_text="the pool it acts in (default: the whole factory)",
    )
    deployment = serializers.SlugRelatedField(
        slug_field="slug",
        queryset=deployment_list(),
        required=False,
        allow_null=True,
        help_text="the deployment it acts in: its pool, by its share of the pool's production",
    )
    gpus_withdrawn = serializers.IntegerField(
        min_value=0,
        max_value=10**6,
        default=0,
        help_text="GPUs of its pool taken out of service (their depreciation, hosting and "
        "idle power saved through the TFOM formulas)",
    )

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
            "pool",
            "deployment",
            "gpus_withdrawn",
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
    min_ebitda_per_month = MoneyField(
        signed=True, decimal_places=4, required=False, allow_null=True
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


class LeverViewSet(FactoryVersionViewSet):
    """The lever catalogue, every version (`?slug=` one lever's history)."""

    serializer_class = LeverSerializer
    queryset = Lever.objects.all()
    filterset_class = LeverFilterSet
    create_service = staticmethod(lever_create)


class GoalViewSet(FactoryVersionViewSet):
    """Goals, effective-dated: the version in force is checked by every cycle."""

    serializer_class = GoalSerializer
    queryset = Goal.objects.all()
    create_service = staticmethod(goal_create)
