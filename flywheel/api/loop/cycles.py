"""Flywheel cycles: the history, and a cycle run now over a chosen period."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response

from flywheel.api.loop.applications import LeverApplicationSerializer
from flywheel.api.loop.writes import ERRORS, FactoryWrite
from flywheel.models import Cycle
from flywheel.selectors.loop.cycles import cycle_list
from flywheel.services.loop.cycles import cycle_run
from metering.selectors.usage import window_resolve
from portal.api.fields import ModelSerializer


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
            period = window_resolve(bounds).period
            start, end = period.start, period.end
        cycle = cycle_run(start=start, end=end, by=request.user)
        return Response(
            CycleSerializer(cycle_list().get(pk=cycle.pk)).data, status=status.HTTP_201_CREATED
        )
