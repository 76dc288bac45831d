"""The investor view (TFOM in plain language, monthly trends, industry bands) and the TFOM
reports of finance (a month or a quarter as HTML, CSV, XLSX or PDF)."""

from __future__ import annotations

import re

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_safe

from flywheel.charts.tfom import pnl_chart, trend_factor_chart, trend_money_chart
from flywheel.domain.kpis import band_of
from flywheel.domain.reports.csv_rows import CSV_HEADER, report_csv_rows
from flywheel.domain.reports.explain import EXPLAIN, RENTAL_BAND
from flywheel.domain.reports.model import TfomReport
from flywheel.domain.reports.xlsx import report_xlsx
from flywheel.domain.tfom import annualized_withheld, baseline_tef_parse
from flywheel.selectors.kpis import empty_reason_of
from flywheel.selectors.measurement import FACTORY, kpi_read
from flywheel.selectors.report_periods import report_period_parse, report_periods
from flywheel.selectors.reports import tfom_report_build
from flywheel.selectors.tfom import tfom_trend, tfom_trend_start
from metering.selectors.usage import window_resolve
from portal.charts import figure_json
from portal.decorators import role_required
from portal.errors import FieldError
from portal.exports import csv_response, export_query
from portal.models import Role
from portal.pdf import pdf_render
from portal.periods import Period, month_start, next_month

TREND_MONTHS = 12

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

BAND_KEYS = (
    ("tef", "TEF — production efficiency"),
    ("occupancy", "Occupancy β — GPUs put to work"),
    ("sla_delivery", "SLA delivery σ — on-time production"),
    ("tfi", "TFI — sold, on time, at list price"),
)


@require_safe
@role_required(Role.INVESTOR, Role.FINANCE, Role.OPERATOR)
def investor(request):
    """Revenue, margins, EBITDA, ROI, payback, equivalent GPUs and avoided capex of the
    period, monthly trends and industry bands, explained for non-specialists."""
    window = window_resolve(request.GET, default="last_30_days")
    period = window.period
    baseline = baseline_tef_parse(request.GET.get("baseline_tef"))
    context = {
        "title": "Investor view",
        "period": period,
        "window": window,
        "explain": EXPLAIN,
        "baseline_tef": baseline,
        "rental_band": RENTAL_BAND,
    }
    if empty_reason := empty_reason_of(window=window, scope=FACTORY):
        return render(
            request, "flywheel/tfom/investor.html", {**context, "empty_reason": empty_reason}
        )
    trend_start = tfom_trend_start(end=period.end, months=TREND_MONTHS)
    data = kpi_read(
        Period(min(period.start, trend_start) if trend_start else period.start, period.end)
    )
    try:
        report = tfom_report_build(
            start=period.start,
            end=period.end,
            label=f"{period.start:%d %b %Y} – {period.end:%d %b %Y}",
            baseline_tef=baseline,
            data=data,
        )
    except FieldError as error:
        return render(request, "flywheel/tfom/investor.html", {**context, "error": error.message})
    points = tfom_trend(end=period.end, months=TREND_MONTHS, data=data)
    measured = [p for p in points if p.tfom is not None]
    t = report.tfom
    context.update(
        report=report,
        tfom=t,
        sections={section.key: section for section in report.sections},
        bands=[
            (key, label, getattr(t, key), band_of(key, getattr(t, key)), EXPLAIN[key])
            for key, label in BAND_KEYS
        ],
        ebitda_margin=(t.ebitda / t.revenue) if t.revenue else None,
        annualized_withheld=annualized_withheld(start=period.start, end=period.end),
        extra_gpus=t.equivalent_gpus - report.installed_gpus,
        trend=points,
        partial_months=[p for p in measured if p.is_partial],
        money_chart=(
            figure_json(trend_money_chart(measured, currency=report.currency)) if measured else None
        ),
        factor_chart=figure_json(trend_factor_chart(measured)) if measured else None,
        has_snapshots=any(p.source == "snapshot" for p in measured),
    )
    return render(request, "flywheel/tfom/investor.html", context)


QUARTER_KEY = re.compile(r"^\d{4}-Q[1-4]\Z")


def _file_key(window) -> str:
    """A report file's period in its name: the month (2026-11) or quarter (2026-Q4) it
    covers, whatever preset named it, else its bounds to the hour (this month so far, the
    last 30 days, custom)."""
    start, end = window.period.start, window.period.end
    if start == month_start(start) and end == next_month(start):
        return f"{start:%Y-%m}"
    if QUARTER_KEY.match(window.key or ""):
        return window.key
    return f"{start:%Y%m%dT%H}-{end:%Y%m%dT%H}"


@require_safe
@role_required(Role.OPERATOR, Role.FINANCE, Role.INVESTOR)
def tfom_reports(request):
    """Without `period`: the months and quarters with download links. With `period`
    (YYYY-MM or YYYY-Qn): the report as HTML, or as `format` csv, xlsx or pdf."""
    if not any(request.GET.get(name) for name in ("period", "from", "to")):
        return render(
            request,
            "flywheel/tfom/reports.html",
            {
                "title": "TFOM reports",
                # The picker opens any period's report; it starts on the last whole month.
                "window": window_resolve({}, default="last_month"),
                "periods": report_periods(),
                "formats": ("csv", "xlsx", "pdf"),
            },
        )
    period = report_period_parse(request.GET)
    if empty_reason := empty_reason_of(window=period, scope=FACTORY):
        return render(
            request,
            "flywheel/tfom/reports_detail.html",
            {
                "title": f"TFOM report · {period.caption}",
                "period": period,
                "window": period,
                "empty_reason": empty_reason,
            },
        )
    try:
        report = tfom_report_build(start=period.start, end=period.period.end, label=period.caption)
    except FieldError as error:
        return render(
            request,
            "flywheel/tfom/reports_detail.html",
            {"title": f"TFOM report · {period.caption}", "period": period, "error": error.message},
        )
    output = request.GET.get("format", "html")
    filename = f"tfom-{_file_key(period)}"
    if output == "csv":
        return csv_response(
            filename=f"{filename}.csv", header=CSV_HEADER, rows=report_csv_rows(report)
        )
    if output == "xlsx":
        response = HttpResponse(report_xlsx(report), content_type=XLSX)
        response["Content-Disposition"] = f'attachment; filename="{filename}.xlsx"'
        return response
    if output == "pdf":
        pdf = report_pdf(report, base_url=request.build_absolute_uri("/"))
        response = HttpResponse(pdf, content_type="application/pdf")
        response["Content-Disposition"] = f'inline; filename="{filename}.pdf"'
        return response
    return render(
        request,
        "flywheel/tfom/reports_detail.html",
        {
            "title": f"TFOM report · {period.caption}",
            "period": period,
            "report": report,
            "downloads": {f: export_query(request, format=f) for f in ("csv", "xlsx", "pdf")},
        },
    )


def report_pdf(report: TfomReport, *, base_url: str) -> bytes:
    """The report as PDF, rendered by WeasyPrint from its HTML document."""
    html = render_to_string(
        "flywheel/tfom/tfom_report_document.html",
        {"report": report, "chart": pnl_chart(report), "issuer": settings.FACTORY_NAME},
    )
    return pdf_render(html=html, base_url=base_url)
