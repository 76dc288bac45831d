"""Charts of TFOM: the monthly trend of money (revenue, COGS, opex, EBITDA, EBIT) and of
TEF and TFI, and the TFOM report's P&L as SVG geometry for its PDF."""

import plotly.graph_objects as go

from flywheel.domain.reports.formats import report_money
from flywheel.domain.reports.model import TfomReport
from flywheel.selectors.tfom import TrendMonth
from portal.charts import PARTIAL_PATTERN, band_mark, base_layout, level_mark, month_label


def _month_label(point: TrendMonth) -> str:
    return month_label(point.month, start=point.start, end=point.end)


def trend_money_chart(points: list[TrendMonth], *, currency: str) -> go.Figure:
    """Monthly revenue against COGS and opex (bars), EBITDA and EBIT (lines); a partial
    month's bars hatched, its points open, its label saying how much of it there is."""
    points = [p for p in points if p.tfom is not None]
    x = [_month_label(p) for p in points]
    fig = go.Figure(layout=base_layout(y_title=f"{currency} per month", x_title="Month (UTC)"))
    for key, name, colour in (
        ("revenue", "Revenue", "#1f6feb"),
        ("cogs", "COGS (depreciation, energy, hosting)", "#e8590c"),
        ("opex", "Opex (staff, SG&A)", "#adb5bd"),
    ):
        fig.add_bar(
            x=x,
            y=[float(getattr(p.tfom, key)) for p in points],
            name=name,
            marker={
                "color": colour,
                "pattern": {"shape": [PARTIAL_PATTERN if p.is_partial else "" for p in points]},
            },
        )
    for key, name, colour in (("ebitda", "EBITDA", "#2b8a3e"), ("ebit", "EBIT", "#7048e8")):
        values = [float(getattr(p.tfom, key)) for p in points]
        _monthly_line(fig, points, x=x, y=values, key=key, name=name, colour=colour)
    fig.update_layout(barmode="group")
    return fig


def _monthly_line(
    fig: go.Figure,
    points: list[TrendMonth],
    *,
    x: list[str],
    y: list[float | None],
    key: str,
    name: str,
    colour: str,
) -> None:
    """A monthly line that joins whole months only: a partial month's figure is an open
    point of its own, never the end of a line diving to it."""
    fig.add_scatter(
        x=x,
        y=[None if p.is_partial else v for p, v in zip(points, y, strict=True)],
        name=name,
        legendgroup=key,
        mode="lines+markers",
        line={"color": colour, "width": 3},
    )
    partial = [
        (label, v)
        for p, label, v in zip(points, x, y, strict=True)
        if p.is_partial and v is not None
    ]
    if partial:
        fig.add_scatter(
            x=[label for label, _ in partial],
            y=[v for _, v in partial],
            name=f"{name} (partial month)",
            legendgroup=key,
            showlegend=False,
            mode="markers",
            marker={"color": colour, "symbol": "circle-open", "size": 10, "line": {"width": 2}},
        )


def trend_factor_chart(points: list[TrendMonth]) -> go.Figure:
    """Monthly TEF and TFI (percent), a partial month an open point as in the money chart,
    over the kpis.md bands, as the band column words them
    (flywheel.domain.bands): typical TEF 20–35%, good from 40%, the 65% target; TFI
    excellent 35–45%."""
    x = [_month_label(p) for p in points]
    fig = go.Figure(layout=base_layout(y_title="Percent of GPU time", x_title="Month (UTC)"))
    marks = [
        band_mark(20, 35, colour="#adb5bd", opacity=0.2,
                  label="typical TEF 20–35%; good from 40%", label_at="bottom"),
        band_mark(35, 45, colour="#2b8a3e", opacity=0.10, label="excellent TFI 35–45%"),
        level_mark(65, colour="#5b3cc4", label="TEF target 65%"),
    ]  # fmt: skip
    fig.update_layout(shapes=[shape for shape, _ in marks], annotations=[n for _, n in marks])
    for key, name, colour in (("tef", "TEF", "#1f6feb"), ("tfi", "TFI", "#d9480f")):
        values = [None if getattr(p, key) is None else float(getattr(p, key)) * 100 for p in points]
        _monthly_line(fig, points, x=x, y=values, key=key, name=name, colour=colour)
    fig.update_yaxes(range=[0, 100])
    return fig


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
                "text": f"{report_money(value, currency=report.currency):,.0f}",
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
