"""The FOCUS 1.2 export of a month: CSV or Parquet (tenants their own; finance any)."""

import csv
import io

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import renderers
from rest_framework.views import APIView

from billing.api.pricing import CommercialRead
from billing.domain.focus import COLUMNS, NAMES, arrow_table, csv_value
from billing.selectors.focus import focus_rows
from portal import clock
from portal.access import tenant_get
from portal.api.negotiation import FileNegotiation
from portal.errors import FieldError
from portal.periods import month_parse, month_start, months_before


def focus_response(*, rows: list[dict], name: str, format: str) -> HttpResponse:
    """The rows as a download: CSV (a header of the FOCUS column names) or Parquet."""
    if format == "parquet":
        import pyarrow.parquet as pq

        buffer = io.BytesIO()
        pq.write_table(arrow_table(rows), buffer)
        response = HttpResponse(buffer.getvalue(), content_type="application/vnd.apache.parquet")
        response["Content-Disposition"] = f'attachment; filename="{name}.parquet"'
        return response
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(NAMES)
    for row in rows:
        writer.writerow([csv_value(column, row.get(column.name)) for column in COLUMNS])
    response = HttpResponse(text.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response


class FocusExportView(APIView):
    """FOCUS 1.2 cost and usage rows of a month: the lines of the invoices that bill it, the
    purchases and credit notes issued in it; BilledCost sums to its invoices less credit
    notes. `tenant` (members: their own, the default)."""

    permission_classes = [CommercialRead]
    renderer_classes = [renderers.JSONRenderer]  # errors; the files are written by the view
    content_negotiation_class = FileNegotiation

    @extend_schema(
        parameters=[
            OpenApiParameter("month", str, description="YYYY-MM (default: last month)"),
            OpenApiParameter("tenant", str, description="tenant slug"),
            OpenApiParameter("format", str, enum=["csv", "parquet"]),
        ],
        responses={(200, "text/csv"): str, (200, "application/vnd.apache.parquet"): bytes},
    )
    def get(self, request):
        params = request.query_params
        month = (
            month_parse(params["month"])
            if params.get("month")
            else months_before(month_start(clock.now()), 1)
        )
        format = params.get("format", "csv")
        if format not in ("csv", "parquet"):
            raise FieldError("format", "must be csv or parquet")
        slug = params.get("tenant")
        tenant = tenant_get(user=request.user, slug=slug) if slug else None
        rows = list(focus_rows(user=request.user, month=month, tenant=tenant))
        name = f"focus-{slug or 'all'}-{month:%Y-%m}"
        return focus_response(rows=rows, name=name, format=format)
