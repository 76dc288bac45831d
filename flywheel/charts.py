"""The flywheel's charts: Plotly figures of the KPI engine (measured KPIs and snapshots),
the diagnosis, the simulator's factors and the levers' realized uplift; the TFOM report's
P&L as SVG geometry for its PDF."""

import plotly.graph_objects as go

from flywheel.domain.loop.factors import FACTORS, LABELS, SYMBOLS
from flywheel.domain.reports.formats import report_money
from flywheel.domain.reports.model import TfomReport
from flywheel.selectors.tfom import TrendMonth
from portal.charts import PARTIAL_PATTERN, band_mark, base_layout, colour_of, level_mark

# The six factors as the charts name them: "α availability" … "ρ price realization".
FACTOR_NAMES = [(f, f"{SYMBOLS[f]} {LABELS[f]}") for f in FACTORS]


def waterfall_chart(values: dict) -> go.Figure:
    """From 100% of calendar capacity through α, β, η to TEF, then σ, s, ρ to TFI: each
    step multiplies the level by its factor; the bars multiply to the TFI shown."""
    x, y, measure, text = ["Calendar capacity"], [100.0], ["absolute"], ["100%"]
    level = 100.0
    for key, label in FACTOR_NAMES:
        factor = values.get(key)
        factor = 0.0 if factor is None else float(factor)
        new_level = level * factor
        x.append(label)
        y.append(new_level - level)
        measure.append("relative")
        text.append(f"×{factor:.1%}")
        level = new_level
        if key == "efficiency":
            x.append("TEF")
            y.append(0)
            measure.append("total")
            text.append(f"{level:.1f}%")
    x.append("TFI")
    y.append(0)
    measure.append("total")
    text.append(f"{level:.1f}%")
    layout = base_layout(y_title="Share of calendar GPU time (%)", x_title="")
    layout["yaxis"]["range"] = [0, 115]
    layout["showlegend"] = False
    fig = go.Figure(layout=layout)
    fig.add_trace(
        go.Waterfall(
            x=x,
            y=y,
            measure=measure,
            text=text,
            textposition="outside",
            connector={"line": {"color": "#adb5bd"}},
            decreasing={"marker": {"color": "#e8590c"}},
            increasing={"marker": {"color": "#2b8a3e"}},
            totals={"marker": {"color": "#1f6feb"}},
        )
    )
    return fig


MONTH_START, MONTH_START_NAME = "#868e96", "month start (free allowances used first)"
INCIDENT = "#c92a2a"


def trend_chart(rows: list[dict], *, incidents: list[tuple] = ()) -> go.Figure:
    """Daily TEF and TFI (percent) from the day snapshots, a day without a figure left as a
    gap, with the known causes of dips marked: each month's start (free allowances are used
    first, so little is sold) and the incidents, (start, end, title)."""
    fig = go.Figure(layout=base_layout(y_title="% of calendar GPU time"))
    for key, name, colour in (("tef", "TEF", "#1f6feb"), ("tfi", "TFI", "#d9480f")):
        fig.add_scatter(
            x=[r["day"] for r in rows],
            y=[None if r[key] is None else r[key] * 100 for r in rows],
            name=name,
            mode="lines+markers",
            line={"color": colour},
        )
    # Marks as shapes explained by legend entries, incidents named on hover: no text on the
    # plot to cover the lines or to be clipped at its edges (portal.charts' band label aside).
    band, band_label = band_mark(
        20, 35, colour="#adb5bd", opacity=0.15, label="typical TEF 20–35%", label_at="top"
    )
    shapes, notes = [band], [band_label]
    starts = [row["day"].isoformat() for row in rows if row["day"].day == 1]
    for day in starts:
        shapes.append({"type": "line", "xref": "x", "x0": day, "x1": day, "yref": "y domain",
                       "y0": 0, "y1": 1, "line": {"color": MONTH_START, "dash": "dot"}})  # fmt: skip
    if starts:
        fig.add_scatter(x=[None], y=[None], mode="lines", name=MONTH_START_NAME,
                        line={"color": MONTH_START, "dash": "dot"})  # fmt: skip
    for start, end, _title in incidents:
        shapes.append({"type": "rect", "xref": "x", "x0": start.isoformat(),
                       "x1": end.isoformat(), "yref": "y domain", "y0": 0, "y1": 1,
                       "fillcolor": INCIDENT, "opacity": 0.12, "line": {"width": 0}})  # fmt: skip
    if incidents:
        fig.add_scatter(
            x=[start for start, _end, _title in incidents],
            y=[0] * len(incidents),
            mode="markers",
            name="incident (hover for its title)",
            marker={"color": INCIDENT, "symbol": "triangle-up", "size": 10},
            hovertext=[f"incident: {title}" for _start, _end, title in incidents],
            hoverinfo="text+x",
        )
    fig.update_layout(shapes=shapes, annotations=notes)
    if rows:  # the plotted days, not stretched by Plotly to fit the labels' text
        first, last = rows[0]["day"], rows[-1]["day"]
        fig.update_xaxes(range=[f"{first.isoformat()} 00:00", f"{last.isoformat()} 23:59"])
    return fig


def tps_chart(rows: list[dict]) -> go.Figure:
    """Actual against theoretical output tokens per second, per day."""
    fig = go.Figure(layout=base_layout(y_title="Output tokens per second"))
    fig.add_scatter(x=[r["day"] for r in rows], y=[r["theoretical_tps"] for r in rows],
                    name="theoretical (R_ref on every installed GPU)", mode="lines",
                    line={"color": "#868e96", "dash": "dash"})  # fmt: skip
    fig.add_scatter(x=[r["day"] for r in rows], y=[r["tps"] for r in rows], name="actual",
                    mode="lines+markers", line={"color": colour_of("factory")})  # fmt: skip
    return fig


def _month_label(point: TrendMonth) -> str:
    """The month, and how much of it a partial one holds: "Dec 2026 (37 h)", "(20 d)"."""
    label = point.month.strftime("%b %Y")
    if not point.is_partial:
        return label
    hours = (point.end - point.start).total_seconds() / 3600
    return f"{label} ({hours:,.0f} h)" if hours < 7 * 24 else f"{label} ({hours / 24:,.0f} d)"


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
        fig.add_scatter(
            x=x,
            y=[float(getattr(p.tfom, key)) for p in points],
            name=name,
            mode="lines+markers",
            line={"color": colour, "width": 3},
            marker={"symbol": ["circle-open" if p.is_partial else "circle" for p in points]},
        )
    fig.update_layout(barmode="group")
    return fig


def trend_factor_chart(points: list[TrendMonth]) -> go.Figure:
    """Monthly TEF and TFI (percent) over the kpis.md bands and the TEF target."""
    x = [_month_label(p) for p in points]
    fig = go.Figure(layout=base_layout(y_title="Percent of GPU time", x_title="Month (UTC)"))
    marks = [
        band_mark(20, 35, colour="#adb5bd", opacity=0.2, label="typical TEF 20–35%",
                  label_at="bottom"),
        band_mark(35, 45, colour="#2b8a3e", opacity=0.10, label="excellent TFI 35–45%"),
        level_mark(65, colour="#5b3cc4", label="TEF target 65%"),
    ]  # fmt: skip
    fig.update_layout(shapes=[shape for shape, _ in marks], annotations=[n for _, n in marks])
    for key, name, colour in (("tef", "TEF", "#1f6feb"), ("tfi", "TFI", "#d9480f")):
        fig.add_scatter(
            x=x,
            y=[None if getattr(p, key) is None else float(getattr(p, key)) * 100 for p in points],
            name=name,
            mode="lines+markers",
            line={"color": colour, "width": 3},
        )
    fig.update_yaxes(range=[0, 100])
    return fig


BOTTLENECK_COLOUR = "#d9480f"

FACTOR_COLOUR = "#1f6feb"

MEASURED_COLOUR = "#868e96"


def diagnosis_chart(factors, *, currency: str, per_month: str = "per month") -> go.Figure:
    """Monthly EBITDA each factor gains alone at its target if demand follows, ranked
    (bottleneck first)."""
    labels = [f"{f.symbol} {f.label}" for f in factors]
    gains = [float(f.ebitda_gain_per_month) for f in factors]
    colours = [
        BOTTLENECK_COLOUR if i == 0 and gains[0] > 0 else FACTOR_COLOUR for i in range(len(factors))
    ]
    layout = base_layout(
        x_title=f"EBITDA gained {per_month} at the target if demand follows ({currency})",
        y_title="",
    )
    layout["yaxis"] = {"autorange": "reversed", "automargin": True}
    layout["showlegend"] = False
    layout["margin"] = {"l": 150, "r": 30, "t": 20, "b": 60}
    fig = go.Figure(layout=layout)
    fig.add_bar(
        y=labels,
        x=gains,
        orientation="h",
        marker_color=colours,
        text=[f"{g:,.0f}" for g in gains],
        textposition="auto",
        hovertemplate="%{y}: %{x:,.0f} " + currency + f" {per_month}<extra></extra>",
    )
    return fig


def factors_chart(measured) -> go.Figure:
    """The six factors, measured against projected (the simulator redraws the second)."""
    labels = [name for _, name in FACTOR_NAMES]
    values = [
        None if getattr(measured, f) is None else float(getattr(measured, f)) * 100 for f in FACTORS
    ]
    layout = base_layout(y_title="Percent", x_title="")
    layout["barmode"] = "group"
    layout["margin"] = {"l": 60, "r": 10, "t": 20, "b": 110}
    fig = go.Figure(layout=layout)
    fig.add_bar(x=labels, y=values, name="measured", marker_color=MEASURED_COLOUR)
    fig.add_bar(x=labels, y=values, name="projected", marker_color=FACTOR_COLOUR)
    return fig


def realized_chart(rows: list[dict]) -> go.Figure:
    """Projected against realized uplift per lever and factor, in percent."""
    x = [f"{r['lever']} · {SYMBOLS.get(r['factor'], r['factor'])}" for r in rows]
    layout = base_layout(y_title="Uplift of the factor (%)", x_title="Lever · factor")
    layout["barmode"] = "group"
    fig = go.Figure(layout=layout)
    fig.add_bar(
        x=x,
        y=[r["projected_uplift"] * 100 for r in rows],
        name="projected",
        marker_color=MEASURED_COLOUR,
    )
    fig.add_bar(
        x=x, y=[r["realized_uplift"] * 100 for r in rows], name="realized", marker_color="#2b8a3e"
    )
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
