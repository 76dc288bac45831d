"""Charts of the market figures (kpis.md 4b, the Cockpit): the consumption × value
quadrant with its tenants named where they stay legible, and the revenue of each cohort."""

import math

import plotly.graph_objects as go

from portal.charts import base_layout, level_mark
from portal.formatting import tokens_short

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
