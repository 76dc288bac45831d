"""Flywheel cycles: the history, and a cycle queued now over a chosen period."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlencode

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response

from flywheel.api.loop.applications import LeverApplicationSerializer
from flywheel.api.loop.writes import ERRORS, FactoryWrite
from flywheel.models import Cycle
from flywheel.selectors.loop.cycles import cycle_list, last_full_week
from flywheel.selectors.loop.shapes import rfc3339
from flywheel.tasks import cycle_queue
from metering.selectors.usage import window_resolve
from portal import clock
from portal.api.fields import ModelSerializer
from portal.errors import FieldError


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


class CycleQueuedSerializer(serializers.Serializer):
    to = serializers.DateTimeField(help_text="the period's end (excluded)")
    url = serializers.CharField(help_text="the cycles of that period: the cycle once it ran")


CycleQueuedSerializer._declared_fields["from"] = serializers.DateTimeField()


def _period(query) -> tuple[datetime, datetime] | None:
    """[from, to) as given (both or neither), resolved as every period is."""
    bounds = {k: query[k] for k in ("from", "to") if query.get(k)}
    if not bounds:
        return None
    if len(bounds) == 1:
        raise serializers.ValidationError({"to": ["give both from and to, or neither"]})
    period = window_resolve(bounds).period
    return period.start, period.end


@extend_schema(responses={400: ERRORS, 403: ERRORS})
class CycleViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Flywheel cycles, newest first (the weekly job writes one per week; `?from=&to=` the
    cycle of that period). POST queues one over [from, to) (default: the last 7 whole UTC
    days): 202 with the URL of that period's cycles; the cycle job does the work, and
    running it again for the same period rewrites it."""

    permission_classes = [FactoryWrite]
    serializer_class = CycleSerializer

    def get_queryset(self):
        cycles = cycle_list()
        if self.action == "list" and (period := _period(self.request.query_params)):
            cycles = cycles.filter(period_start=period[0], period_end=period[1])
        return cycles

    @extend_schema(request=CycleRunSerializer, responses={202: CycleQueuedSerializer})
    def create(self, request):
        body = CycleRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        period = last_full_week(now=clock.now())
        start, end = _period(body.validated_data) or (period.start, period.end)
        if end <= start:
            raise FieldError("to", "must be after from")
        bounds = {"from": rfc3339(start), "to": rfc3339(end)}
        cycle_queue(start=start, end=end)
        url = f"{reverse('flywheel-cycle-list')}?{urlencode(bounds)}"
        return Response({**bounds, "url": url}, status=status.HTTP_202_ACCEPTED)
