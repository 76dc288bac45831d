"""The month-end close: queue (or resume) it, read its report; aged receivables."""

from decimal import Decimal

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.domain.receivables import BUCKETS
from billing.selectors.close import CloseReport, close_report
from billing.selectors.receivables import aged_receivables
from billing.services.close import close_check
from billing.tasks import close_task
from portal import clock
from portal.access import Capability
from portal.money import money_str
from portal.periods import day_parse, month_parse
from portal.permissions import capability_permission

Books = capability_permission(read=Capability.READ_BOOKS, write=Capability.WRITE_COMMERCIAL)


class CloseIn(serializers.Serializer):
    month = serializers.CharField(help_text="YYYY-MM")


class CloseView(APIView):
    """Queue the month-end close of a month that is over (or resume it): 202 with the
    report's URL; the close job does the work."""

    permission_classes = [Books]

    @extend_schema(request=CloseIn, responses={202: None})
    def post(self, request):
        given = CloseIn(data=request.data)
        given.is_valid(raise_exception=True)
        month = close_check(month_parse(given.validated_data["month"]))
        close_task.apply_async(kwargs={"month": f"{month:%Y-%m}"})
        url = reverse("close-report", kwargs={"month": f"{month:%Y-%m}"})
        return Response({"month": f"{month:%Y-%m}", "url": url}, status=status.HTTP_202_ACCEPTED)


def _money(amount) -> str:
    return money_str(amount=amount, currency=settings.FACTORY_CURRENCY)


def _exact(amount: Decimal) -> str:
    """An unrounded amount as a plain decimal string, without trailing zeros."""
    text = format(amount.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def report_json(report: CloseReport) -> dict:
    """The close report as the API gives it (architecture.md "Response shapes")."""
    return {
        "month": f"{report.month:%Y-%m}",
        "status": report.status,
        "steps": [
            {"name": step.name, "done_at": step.done_at.isoformat(), "detail": step.detail}
            for step in report.steps
        ],
        "error": report.close.error if report.close else "",
        "rated": _exact(report.rated),
        "invoiced": _money(report.invoiced),
        "carried": _money(report.carried),
        "uncarried": _money(report.uncarried),
        "rounding": _exact(report.rounding),
        "rating_errors": report.rating_errors,
        "ledger_revenue": {code: _money(v) for code, v in report.ledger_revenue.items()},
        "document_revenue": {code: _money(v) for code, v in report.document_revenue.items()},
        "revenue_difference": {code: _money(v) for code, v in report.revenue_difference.items()},
        "trial_balance": [
            {"account": code, "debit": _money(debit), "credit": _money(credit)}
            for code, debit, credit in report.trial_balance
        ],
        "is_balanced": report.is_balanced,
    }


class CloseReportView(APIView):
    """The close report of a month: steps done, rated = invoiced + carried (+ late usage not
    yet carried) up to line rounding, ledger revenue = the documents' revenue, a trial
    balance to the month's end."""

    permission_classes = [Books]

    @extend_schema(responses={200: dict})
    def get(self, request, month: str):
        return Response(report_json(close_report(month=month_parse(month))))


class ReceivablesView(APIView):
    """Aged receivables per tenant as of a day (default today, UTC): outstanding money in
    current, 1–30, 31–60, 61–90 and over-90 days past due."""

    permission_classes = [Books]

    @extend_schema(
        parameters=[OpenApiParameter("as_of", str, description="YYYY-MM-DD (default today)")],
        responses={200: dict},
    )
    def get(self, request):
        value = request.query_params.get("as_of")
        as_of = day_parse(value, field="as_of") if value else clock.now().date()
        rows = aged_receivables(user=request.user, as_of=as_of)
        results = [
            {
                "tenant": row.tenant.slug,
                **{bucket: _money(row.buckets[bucket]) for bucket in BUCKETS},
                "total": _money(row.total),
            }
            for row in rows
        ]
        return Response({"as_of": as_of.isoformat(), "results": results})
