"""GET /api/v1/chargeback (kpis.md 3e): a month's chargeback per tenant and project, on the
invoice basis (each line split to the cent; sums to each invoice before its balances) or at
cost (sums to the month's total_cost over all tenants), as JSON, CSV or XLSX."""

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import renderers
from rest_framework.response import Response
from rest_framework.views import APIView

from flywheel.selectors.chargeback import chargeback_read
from portal import clock
from portal.access import Capability
from portal.api.negotiation import FileNegotiation
from portal.errors import FieldError
from portal.periods import month_parse, month_start
from portal.permissions import capability_permission

FILES = {
    "csv": "text/csv; charset=utf-8",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


class ChargebackView(APIView):
    """`month` (YYYY-MM, default this month: the rating so far, labelled), `tenant` (members:
    their own, the only one they see), `basis` invoice (default) or cost, `format` json
    (default), csv or xlsx. Operators and finance read every tenant's."""

    permission_classes = [capability_permission(read=Capability.READ_TENANT_DATA)]
    renderer_classes = [renderers.JSONRenderer]
    content_negotiation_class = FileNegotiation

    @extend_schema(
        parameters=[
            OpenApiParameter("month", str, description="YYYY-MM (default: this month)"),
            OpenApiParameter("tenant", str, description="tenant slug"),
            OpenApiParameter("basis", str, enum=["invoice", "cost"]),
            OpenApiParameter("format", str, enum=["json", "csv", "xlsx"]),
        ],
        responses={200: dict},
    )
    def get(self, request):
        params = request.query_params
        month = month_parse(params["month"]) if params.get("month") else month_start(clock.now())
        format = params.get("format", "json")
        if format not in ("json", *FILES):
            raise FieldError("format", "must be json, csv or xlsx")
        read = chargeback_read(
            user=request.user, month=month, tenant=params.get("tenant"), basis=params.get("basis")
        )
        if format == "json":
            return Response(read.as_json())
        name = f"chargeback-{read.basis}-{params.get('tenant') or 'all'}-{month:%Y-%m}.{format}"
        body = read.csv() if format == "csv" else read.xlsx()
        response = HttpResponse(body, content_type=FILES[format])
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
