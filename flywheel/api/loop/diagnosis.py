"""GET /api/v1/flywheel/diagnosis: the factors ranked with their evidence."""

from __future__ import annotations

from decimal import Decimal

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from flywheel.api.loop.writes import ERRORS
from flywheel.domain.loop.factors import FACTORS
from flywheel.selectors.kpis import empty_reason_of
from flywheel.selectors.loop.diagnosis import diagnosis_get
from flywheel.selectors.loop.shapes import diagnosis_response, rfc3339
from flywheel.selectors.measurement import FACTORY, kpi_read
from metering.selectors.usage import window_resolve
from portal.access import Capability
from portal.api.periods import PERIOD_PARAMETERS
from portal.permissions import capability_permission


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
            *PERIOD_PARAMETERS,
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
        window = window_resolve(request.query_params)
        targets = _targets(request.query_params.get("targets"))
        reason = empty_reason_of(window=window, scope=FACTORY)
        if reason is not None:  # not enough data: no bottleneck, no loss, no "none"
            return Response(
                {
                    "from": rfc3339(window.start),
                    "to": rfc3339(window.to),
                    "data_until": rfc3339(window.data_until),
                    "empty_reason": reason,
                    "bottleneck": None,
                    "ebitda_per_month": None,
                    "factors": [],
                    "measured": None,
                }
            )
        period = window.period
        data = kpi_read(period)
        diagnosis = diagnosis_get(start=period.start, end=period.end, targets=targets, data=data)
        body = diagnosis_response(diagnosis, rating_errors=data.rating_errors)
        return Response({**body, "data_until": rfc3339(window.data_until), "empty_reason": None})
