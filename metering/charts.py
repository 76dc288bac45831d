"""Plotly figures of metering data (built from selector output, never from raw events)."""

import plotly.graph_objects as go

from metering.models import Pool
from metering.selectors.usage import capacity_series, capacity_stamp
from portal.charts import FigureJson, base_layout, colour_of, figure_json
from portal.kept import kept
from portal.periods import Period


def capacity_chart_json(*, pool: Pool, period: Period, stamp: tuple | None = None) -> str | None:
    """The pool's capacity chart over the period as figure JSON, None without a sample in
    it. Kept in the shared cache under the samples it draws (capacity_stamp): a month of
    15-minute samples is 8,640 values read and written again for every view otherwise.
    `stamp`: the pool's, when the caller read every pool's at once (capacity_stamps)."""
    if stamp is None:
        stamp = capacity_stamp(pool=pool, period=period)
    if not stamp[0]:
        return None

    def build() -> str:
        figure, points = capacity_chart(capacity_series(pool=pool, period=period), pool.slug)
        return FigureJson.of(figure_json(figure, points=points))

    return kept(("metering.capacity", pool.pk, pool.slug, *stamp), build)


def capacity_chart(rows: list[dict], pool: str) -> tuple[go.Figure, list[dict]]:
    """Installed, healthy and busy GPUs of one pool over time: the figure and, beside it,
    each line's points (figure_json's `points`: a month of 15-minute samples is too long
    for Plotly's object model), at the samples where any of the three changes (`changes`):
    one hover lists all three there."""
    fig = go.Figure(layout=base_layout(y_title="GPUs", x_title="Time (UTC)"))
    fig.update_layout(
        hovermode="x unified",
        hoverlabel={"namelength": -1},
        xaxis={"hoverformat": "%b %-d, %Y, %H:%M UTC"},
    )
    fields = ("installed", "healthy", "busy")
    kept = changes([tuple(r[field] for field in fields) for r in rows])
    times = [rows[i]["time"] for i in kept]
    points = []
    for field, dash in zip(fields, ("dot", "dash", "solid"), strict=True):
        fig.add_scatter(
            name=f"{pool} {field}",
            mode="lines",
            line={"color": colour_of(pool), "dash": dash, "shape": "hv"},
        )
        points.append({"x": times, "y": [rows[i][field] for i in kept]})
    return fig, points


def changes(values: list) -> list[int]:
    """The indexes of a step line's points ("hv": each value holds until the next point)
    where its value changes, and its last: a point that repeats the one before draws
    nothing. A month of 15-minute samples is 2,880 points a line."""
    last = len(values) - 1
    return [i for i, value in enumerate(values) if i in (0, last) or value != values[i - 1]]
