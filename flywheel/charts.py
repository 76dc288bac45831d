"""The flywheel's charts: Plotly figures of the KPI engine (measured KPIs and snapshots),
the diagnosis, the simulator's factors and the levers' realized uplift; the TFOM report's
P&L as SVG geometry for its PDF."""

import math

import plotly.graph_objects as go

from flywheel.domain.loop.factors import FACTORS, LABELS, SYMBOLS
from flywheel.domain.reports.formats import report_money
from flywheel.domain.reports.model import TfomReport
from flywheel.selectors.tfom import TrendMonth
from portal.charts import (
    PARTIAL_PATTERN,
    band_mark,
    base_layout,
    colour_of,
    level_mark,
)
from portal.formatting import tokens_short

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


# -- the cockpit: market figures and forecasts --------------------------------------------

QUADRANT_COLOURS = {
    "anchor": "#1f6feb",
    "volume": "#2b8a3e",
    "premium": "#7048e8",
    "long tail": "#868e96",
}
QUADRANT_NAMED = 15  # the largest tenants named on the plot; hover names every one


def quadrant_chart(points: list[dict], *, x_median, y_median, currency: str) -> go.Figure:
    """One dot per tenant with revenue: its share of the paid tokens against its revenue per
    million paid tokens, sized by revenue, coloured by its quadrant, split by the medians
    (dotted); the largest tenants named beside their dot. `points`: tenant, name, revenue,
    x, y, label (plain values, y None without paid tokens)."""
    placed = [p for p in points if p["y"] is not None]
    xs = [p["x"] * 100 for p in placed]
    spread = max(xs, default=0) / min((x for x in xs if x > 0), default=1)
    log_x = spread > 50  # Zipf-like shares: the small tenants would sit on the axis
    layout = base_layout(
        x_title="Share of the paid tokens (%)" + (", log scale" if log_x else ""),
        y_title=f"Revenue per million paid tokens ({currency})",
    )
    layout["xaxis"]["type"] = "log" if log_x else "linear"
    low, high = (0.0, 1.0)
    if xs:  # room for the names beside the dots at either end
        if log_x:
            low, high = min(x for x in xs if x > 0) / 1.5, max(xs) * 1.5
            layout["xaxis"]["range"] = [math.log10(low), math.log10(high)]
        else:
            low, high = -0.05 * max(xs), 1.08 * max(xs)
            layout["xaxis"]["range"] = [low, high]
    top = max((p["y"] for p in placed), default=1.0) * 1.15 or 1.0
    layout["yaxis"]["range"] = [0, top]
    layout["height"] = 480
    fig = go.Figure(layout=layout)
    largest = max((p["revenue"] for p in placed), default=0) or 1
    named = {p["tenant"] for p in sorted(placed, key=lambda p: -p["revenue"])[:QUADRANT_NAMED]}
    offsets = _label_offsets(placed, named=named, log_x=log_x, x_range=(low, high), top=top)
    names = [
        {"x": math.log10(p["x"] * 100) if log_x else p["x"] * 100, "y": p["y"], "xref": "x",
         "yref": "y", "text": p["name"], "showarrow": True, "arrowhead": 0, "arrowwidth": 1,
         "arrowcolor": "#adb5bd", "ax": offsets[p["tenant"]][0],
         "ay": -offsets[p["tenant"]][1], "font": {"size": 12}}
        for p in placed
        if p["tenant"] in offsets
    ]  # fmt: skip
    for label, colour in QUADRANT_COLOURS.items():
        mine = [p for p in placed if p["label"] == label]
        if not mine:
            continue
        fig.add_scatter(
            x=[p["x"] * 100 for p in mine],
            y=[p["y"] for p in mine],
            mode="markers",
            name=label,
            marker={
                "color": colour,
                "size": [10 + 30 * (p["revenue"] / largest) ** 0.5 for p in mine],
                "line": {"color": "#fff", "width": 1},
            },
            customdata=[[p["name"], p["revenue"]] for p in mine],
            hovertemplate="%{customdata[0]}: %{x:.1f}% of paid tokens, %{y:,.2f} "
            + currency
            + " per million; revenue %{customdata[1]:,.0f} "
            + currency
            + "<extra>"
            + label
            + "</extra>",
        )
    marks = []
    if x_median is not None:
        marks.append(
            ({"type": "line", "xref": "x", "x0": x_median * 100, "x1": x_median * 100,
              "yref": "y domain", "y0": 0, "y1": 1, "line": {"color": "#adb5bd", "dash": "dot"}},
             {"text": "median share", "xref": "x", "x": x_median * 100, "yref": "y domain",
              "y": 1, "yanchor": "bottom", "showarrow": False})
        )  # fmt: skip
    if y_median is not None:
        marks.append(level_mark(y_median, colour="#adb5bd", label="median revenue per million"))
    corners = (("premium", 0, 1), ("anchor", 1, 1), ("long tail", 0, 0), ("volume", 1, 0))
    notes = [
        {"text": name, "xref": "x domain", "yref": "y domain", "x": x, "y": y,
         "xanchor": "right" if x else "left", "yanchor": "top" if y else "bottom",
         "showarrow": False, "font": {"color": QUADRANT_COLOURS[name], "size": 12}}
        for name, x, y in corners
    ]  # fmt: skip
    fig.update_layout(
        shapes=[shape for shape, _ in marks], annotations=[n for _, n in marks] + notes + names
    )
    return fig


# The quadrant's plot area as the page draws it (pixels), and a name's size in it: where the
# names are placed is worked out at that size (the chart keeps its proportions when it
# scales). Plotly places text where it is told: it never moves colliding names apart.
PLOT_PX = (960.0, 360.0)
CHAR_PX, LINE_PX = 6.6, 16.0
# Offsets of a name's centre from its dot (pixels, y up), nearest first: the first place
# clear of the names placed before and of the dots is taken, else the least crowded.
LABEL_OFFSETS = [
    (dx * r, dy * r)
    for r in (1.0, 1.8, 2.6)
    for dx, dy in ((0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (-1, 1), (1, -1), (-1, -1))
]


def _label_offsets(
    points: list[dict],
    *,
    named: set[str],
    log_x: bool,
    x_range: tuple[float, float],
    top: float,
) -> dict[str, tuple[float, float]]:
    """Each named dot's label offset (pixels, y up), largest tenants first (kpis.md 4b's
    quadrant is read without hovering, so every name must stay legible)."""
    low, high = x_range

    def pixel(p: dict) -> tuple[float, float]:
        x = p["x"] * 100
        if log_x:
            x, low_x, high_x = math.log10(max(x, 1e-9)), math.log10(low), math.log10(high)
        else:
            low_x, high_x = low, high
        return (
            (x - low_x) / ((high_x - low_x) or 1) * PLOT_PX[0],
            p["y"] / top * PLOT_PX[1],
        )

    dots = {p["tenant"]: pixel(p) for p in points}
    boxes: list[tuple[float, float, float, float]] = [  # the corners' quadrant names
        (0, PLOT_PX[1] - LINE_PX, 80, PLOT_PX[1]),
        (PLOT_PX[0] - 80, PLOT_PX[1] - LINE_PX, PLOT_PX[0], PLOT_PX[1]),
    ]

    def crowding(box) -> float:
        x0, y0, x1, y1 = box
        overlap = sum(
            max(0.0, min(x1, b[2]) - max(x0, b[0])) * max(0.0, min(y1, b[3]) - max(y0, b[1]))
            for b in boxes
        )
        for cx, cy in dots.values():
            if x0 - 8 < cx < x1 + 8 and y0 - 8 < cy < y1 + 8:
                overlap += 200.0
        outside = max(0.0, -x0) + max(0.0, x1 - PLOT_PX[0]) + max(0.0, y1 - PLOT_PX[1])
        return overlap + 50.0 * outside

    offsets = {}
    for point in sorted(points, key=lambda p: -p["revenue"]):
        if point["tenant"] not in named:
            continue
        cx, cy = dots[point["tenant"]]
        half = len(point["name"]) * CHAR_PX / 2 + 4
        best, best_score = (0.0, 18.0), math.inf
        for dx, dy in LABEL_OFFSETS:
            ox, oy = dx * (half + 10), dy * 18.0
            box = (cx + ox - half, cy + oy - LINE_PX / 2, cx + ox + half, cy + oy + LINE_PX / 2)
            score = crowding(box)
            if score < best_score:
                best, best_score = (ox, oy), score
            if score == 0:
                break
        ox, oy = best
        boxes.append((cx + ox - half, cy + oy - LINE_PX / 2, cx + ox + half, cy + oy + LINE_PX / 2))
        offsets[point["tenant"]] = best
    return offsets


def _cell_colour(value: float, high: float) -> tuple[str, str]:
    """A cell's fill on a light-to-dark blue scale by value / high, and a text colour that
    stays legible on it."""
    share = max(0.0, min(1.0, value / high)) if high > 0 else 0.0
    low_rgb, high_rgb = (238, 244, 255), (27, 79, 184)
    rgb = [round(lo + (hi - lo) * share) for lo, hi in zip(low_rgb, high_rgb, strict=True)]
    return f"rgb({rgb[0]}, {rgb[1]}, {rgb[2]})", "#fff" if share > 0.55 else "#1b1f24"


def cohort_chart(
    rows: list[dict], *, months: list[str], partial: list[str], currency: str
) -> go.Figure:
    """Revenue per cohort (rows: tenants by their first month with revenue) and month
    (columns), each cell's colour and text its revenue; a month the period holds only part
    of is said so under its name. `rows`: cohort, tenants, revenue (floats per month)."""
    columns = [f"{m} (partial)" if m in partial else m for m in months]
    cohorts = [
        f"{r['cohort']} ({r['tenants']} tenant{'s' if r['tenants'] != 1 else ''})" for r in rows
    ]
    layout = base_layout(x_title="Month (UTC)", y_title="Cohort: first month with revenue")
    layout["xaxis"].update(type="category", categoryorder="array", categoryarray=columns)
    layout["yaxis"].update(type="category", categoryorder="array", categoryarray=cohorts,
                           autorange="reversed", rangemode="normal")  # fmt: skip
    layout["showlegend"] = False
    layout["xaxis"]["showgrid"] = layout["yaxis"]["showgrid"] = False
    fig = go.Figure(layout=layout)
    high = max((v for r in rows for v in r["revenue"]), default=0.0)
    shapes, xs, ys, texts, colours = [], [], [], [], []
    for j, row in enumerate(rows):
        for i, value in enumerate(row["revenue"]):
            fill, ink = _cell_colour(value, high)
            shapes.append({"type": "rect", "xref": "x", "yref": "y", "x0": i - 0.48,
                           "x1": i + 0.48, "y0": j - 0.46, "y1": j + 0.46, "fillcolor": fill,
                           "line": {"width": 0}, "layer": "below"})  # fmt: skip
            xs.append(columns[i])
            ys.append(cohorts[j])
            texts.append(tokens_short(value) if value else "—")
            colours.append(ink)
    fig.add_scatter(
        x=xs,
        y=ys,
        mode="text",
        text=texts,
        textfont={"color": colours},
        customdata=[[v] for row in rows for v in row["revenue"]],
        hovertemplate="cohort %{y}, %{x}: %{customdata[0]:,.0f} " + currency + "<extra></extra>",
    )
    fig.add_scatter(  # the colour scale's key
        x=[None],
        y=[None],
        mode="markers",
        marker={"color": [0, high or 1], "colorscale": [[0, "rgb(238, 244, 255)"],
                [1, "rgb(27, 79, 184)"]], "showscale": True,
                "colorbar": {"title": {"text": currency}, "thickness": 12}},
        hoverinfo="skip",
    )  # fmt: skip
    fig.update_layout(shapes=shapes)
    return fig


FORECAST_COLOUR = "#1f6feb"


def forecast_chart(
    *, days: list, actual: list, forecast_days: list, points: list, unit: str, month: dict
) -> go.Figure:
    """The closed days as measured (solid), the forecast (dashed) with its 80% and 95%
    bands, a dotted line where the forecast starts, and the month in progress shaded and
    named as partial (`month`: first and last day, label). `points`: [mean, lo80, hi80,
    lo95, hi95] per forecast day."""
    layout = base_layout(y_title=unit)
    layout["height"] = 440  # the legend names the month in progress below the plot
    fig = go.Figure(layout=layout)
    for name, lo, hi, opacity in (("95% band", 3, 4, 0.12), ("80% band", 1, 2, 0.25)):
        fig.add_scatter(x=forecast_days, y=[p[hi] for p in points], mode="lines",
                        line={"width": 0}, showlegend=False, hoverinfo="skip")  # fmt: skip
        fig.add_scatter(
            x=forecast_days,
            y=[p[lo] for p in points],
            mode="lines",
            line={"width": 0},
            fill="tonexty",
            fillcolor=f"rgba(31, 111, 235, {opacity})",
            name=name,
            hoverinfo="skip",
        )
    fig.add_scatter(x=days, y=actual, mode="lines", name="actual (closed days)",
                    line={"color": "#1b1f24", "width": 2})  # fmt: skip
    fig.add_scatter(x=forecast_days, y=[p[0] for p in points], mode="lines", name="forecast",
                    line={"color": FORECAST_COLOUR, "width": 2, "dash": "dash"})  # fmt: skip
    shapes = []
    if forecast_days:
        start = f"{forecast_days[0]}T00:00:00"
        shapes.append({"type": "line", "xref": "x", "x0": start, "x1": start, "yref": "y domain",
                       "y0": 0, "y1": 1, "line": {"color": "#495057", "dash": "dot"}})  # fmt: skip
    if month:
        shapes.append({"type": "rect", "xref": "x", "x0": f"{month['first']}T00:00:00",
                       "x1": f"{month['end']}T00:00:00", "yref": "y domain", "y0": 0, "y1": 1,
                       "fillcolor": "#adb5bd", "opacity": 0.15, "line": {"width": 0},
                       "layer": "below"})  # fmt: skip
        fig.add_scatter(x=[None], y=[None], mode="markers", name=month["label"],
                        marker={"symbol": "square", "size": 12, "color": "#adb5bd",
                                "opacity": 0.4})  # fmt: skip
    fig.update_layout(shapes=shapes, hovermode="x unified")
    if forecast_days:  # the days drawn, not stretched by Plotly to fit its marks
        first = days[0] if days else forecast_days[0]
        fig.update_xaxes(range=[f"{first}T00:00:00", f"{forecast_days[-1]}T23:59:00"])
    return fig
