"""The PDF export: the P&L bar chart's geometry and the WeasyPrint rendering."""

from __future__ import annotations

from django.conf import settings
from django.template.loader import render_to_string

from flywheel.reports.formats import _money
from flywheel.reports.model import TfomReport

CHART_WIDTH, CHART_LABEL_WIDTH, CHART_BAR_HEIGHT, CHART_GAP = 900, 120, 22, 8
CHART_COLOURS = {"revenue": "#1f6feb", "cost": "#d9480f", "profit": "#2b8a3e", "loss": "#b3261e"}


def pnl_chart(report: TfomReport) -> dict:
    """A horizontal bar chart of the P&L (revenue, costs, EBITDA, EBIT), as SVG geometry the
    PDF template draws: bars to the right of zero are positive, to the left negative."""
    t = report.tfom
    items = [
        ("Revenue", t.revenue, "revenue"),
        ("Depreciation", t.depreciation, "cost"),
        ("Energy", t.energy_cost, "cost"),
        ("Hosting", t.hosting, "cost"),
        ("Opex", t.opex, "cost"),
        ("EBITDA", t.ebitda, "profit" if t.ebitda >= 0 else "loss"),
        ("EBIT", t.ebit, "profit" if t.ebit >= 0 else "loss"),
    ]
    values = [float(value) for _, value, _ in items]
    low, high = min(0.0, *values), max(0.0, *values)
    span = (high - low) or 1.0
    plot = CHART_WIDTH - CHART_LABEL_WIDTH - 110  # room for the value text
    zero_x = CHART_LABEL_WIDTH + plot * (-low / span)
    bars = []
    for index, ((label, value, kind), number) in enumerate(zip(items, values, strict=True)):
        width = plot * abs(number) / span
        x = zero_x if number >= 0 else zero_x - width
        y = 10 + index * (CHART_BAR_HEIGHT + CHART_GAP)
        bars.append(
            {
                "label": label,
                "x": round(x, 1),
                "y": y,
                "width": round(max(width, 0.5), 1),
                "height": CHART_BAR_HEIGHT,
                "colour": CHART_COLOURS[kind],
                "text": f"{_money(value):,.0f}",
                "text_x": round((x + width if number >= 0 else x) + 6, 1),
                "text_y": y + CHART_BAR_HEIGHT / 2 + 4,
                "label_y": y + CHART_BAR_HEIGHT / 2 + 4,
            }
        )
    height = 20 + len(items) * (CHART_BAR_HEIGHT + CHART_GAP)
    return {
        "width": CHART_WIDTH,
        "height": height,
        "label_x": CHART_LABEL_WIDTH - 8,
        "zero_x": round(zero_x, 1),
        "bars": bars,
        "title": f"P&L, {report.label} ({report.currency})",
    }


def report_pdf(report: TfomReport, *, base_url: str) -> bytes:
    """The report as PDF, rendered by WeasyPrint from its HTML document."""
    from weasyprint import HTML

    html = render_to_string(
        "flywheel/tfom_report_document.html",
        {"report": report, "chart": pnl_chart(report), "issuer": settings.FACTORY_NAME},
    )
    return HTML(string=html, base_url=base_url).write_pdf()
