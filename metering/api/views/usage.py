"""The usage list: rows per hour or day, tenant, model and pool."""

from datetime import UTC, date, datetime, time

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.views import APIView

from metering.api.serializers import ErrorsSerializer, UsageRowSerializer
from metering.selectors import usage_list
from portal.access import Capability
from portal.api.errors import errors_response
from portal.api.pagination import Pagination
from portal.periods import period_from_query
from portal.permissions import capability_permission


class UsageListView(APIView):
    """Usage per hour or day, tenant, model and pool (tenants see only their own rows)."""

    permission_classes = [capability_permission(read=Capability.READ_TENANT_DATA)]
    pagination_class = Pagination  # documents the paginated envelope in the schema

    @extend_schema(
        parameters=[
            OpenApiParameter("tenant", str),
            OpenApiParameter("model", str),
            OpenApiParameter("pool", str),
            OpenApiParameter("from", OpenApiTypes.DATETIME),
            OpenApiParameter("to", OpenApiTypes.DATETIME),
            OpenApiParameter("granularity", str, enum=["hour", "day"]),
            OpenApiParameter("page", int),
            OpenApiParameter("page_size", int),
        ],
        responses={200: UsageRowSerializer(many=True), 400: ErrorsSerializer},
    )
    def get(self, request):
        granularity = request.query_params.get("granularity", "day")
        if granularity not in ("hour", "day"):
            return errors_response(
                [{"field": "granularity", "message": 'must be "hour" or "day"'}], 400
            )
        period = period_from_query(request.query_params)
        rows = usage_list(
            user=request.user,
            period=period,
            granularity=granularity,
            tenant=request.query_params.get("tenant"),
            model=request.query_params.get("model"),
            pool=request.query_params.get("pool"),
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response([_usage_row(r) for r in page])


def _usage_row(row: dict) -> dict:
    start = row["period_start"]
    if isinstance(start, date) and not isinstance(start, datetime):
        start = datetime.combine(start, time.min, tzinfo=UTC)
    return {
        "period_start": start.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "tenant": row["tenant__slug"],
        "model": row["deployment__model__slug"],
        "pool": row["deployment__pool__slug"],
        **{
            k: row[k]
            for k in ("requests", "errors", "input_tokens", "cached_tokens", "output_tokens")
        },
    }
