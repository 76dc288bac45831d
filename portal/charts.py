"""Shared chart conventions: fixed colours per pool and model, figures as JSON for Plotly.js."""

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal

import plotly.graph_objects as go
import plotly.io as pio
from django.utils.html import escape

from portal.kept import kept
from portal.periods import Period, is_part_of_month

PALETTE = ["#1f6feb", "#d9480f", "#2b8a3e", "#7048e8", "#c2255c", "#0b7285", "#e67700", "#495057"]
FIXED = {
    "h100-a": "#1f6feb",
    "h200-a": "#d9480f",
    "b200-a": "#2b8a3e",
    "llama-3.3-70b": "#1f6feb",
    "qwen3-235b-a22b": "#d9480f",
    "deepseek-r1": "#2b8a3e",
}


def colour_of(key: str) -> str:
    """The same colour for the same pool or model on every page."""
    if key in FIXED:
        return FIXED[key]
    return PALETTE[int(hashlib.sha1(key.encode()).hexdigest(), 16) % len(PALETTE)]  # noqa: S324


def base_layout(*, y_title: str, x_title: str = "Day (UTC)", barmode: str | None = None) -> dict:
    layout = {
        "margin": {"l": 70, "r": 20, "t": 30, "b": 90},
        # automargin: long or slanted tick labels (a tenant's name) grow the margin, never clip
        "xaxis": {"title": {"text": x_title}, "automargin": True},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero", "automargin": True},
        # Below everything, in the container's coordinates: the axis's slanted tick labels and
        # its title push the plot up, never the legend onto them.
        "legend": {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"},
        "font": {"family": "system-ui, sans-serif", "size": 13},
        "plot_bgcolor": "#fff",
        "paper_bgcolor": "#fff",
    }
    if x_title.startswith("Day"):
        # A day axis never labels times of day: zoomed to one or two days, Plotly would
        # tick "00:00:00", "12:00"; below a day between ticks, each tick is its date.
        layout["xaxis"]["tickformatstops"] = [{"dtickrange": [None, DAY_MS], "value": "%b %-d, %Y"}]
    if barmode:
        layout["barmode"] = barmode
    return layout


DAY_MS = 86_400_000


LABEL_BACKGROUND = "rgba(255, 255, 255, 0.75)"  # a mark's label stays legible over the lines


# Marks are plain layout entries (shapes and annotations), the ones add_hrect and add_hline
# would make: each of those validates the whole figure again (~10 ms a mark).
def band_mark(
    y0: float, y1: float, *, colour: str, opacity: float, label: str, label_at: str = "top"
) -> tuple[dict, dict]:
    """A horizontal band across the plot from y0 to y1 (y axis units), and its label at
    the band's left end, inside it at its `label_at` edge ("top" or "bottom")."""
    shape = {"type": "rect", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y", "y0": y0,
             "y1": y1, "fillcolor": colour, "opacity": opacity, "line": {"width": 0}}  # fmt: skip
    note = {"text": label, "xref": "x domain", "x": 0, "xanchor": "left", "yref": "y",
            "y": y1 if label_at == "top" else y0, "yanchor": label_at, "showarrow": False}  # fmt: skip
    return shape, note


def level_mark(y: float, *, colour: str, label: str) -> tuple[dict, dict]:
    """A dotted horizontal line across the plot at y, and its label above its right end."""
    shape = {"type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y", "y0": y,
             "y1": y, "line": {"color": colour, "dash": "dot"}}  # fmt: skip
    note = {"text": label, "xref": "x domain", "x": 1, "xanchor": "right", "yref": "y",
            "y": y, "yanchor": "bottom", "showarrow": False}  # fmt: skip
    return shape, note


PARTIAL_PATTERN = "/"  # the bars of a partial period (a day or month not whole) are hatched


def month_label(month: datetime, *, start: datetime, end: datetime) -> str:
    """A month on a chart's axis, and how much of it a partial one holds (the part [start,
    end) of it charted): "Nov 2026", "Dec 2026 (37 h)", "Dec 2026 (20 d)"."""
    label = month.strftime("%b %Y")
    if not is_part_of_month(month, start=start, end=end):
        return label
    hours = (end - start).total_seconds() / 3600
    return f"{label} ({hours:,.0f} h)" if hours < 7 * 24 else f"{label} ({hours / 24:,.0f} d)"


def usage_by_model_chart(rows: list[dict], *, period: Period) -> go.Figure:
    """Stacked bars: output tokens per day and model; the days `period` holds only part of
    (today so far) hatched, and said so in the hover."""
    fig = go.Figure(layout=base_layout(y_title="Output tokens per day", barmode="stack"))
    by_day: dict[tuple, dict] = {}  # rows per tier summed per model and day
    for r in rows:
        cell = by_day.setdefault((r["model"], r["day"]), {**r, "output_tokens": 0})
        cell["output_tokens"] += r["output_tokens"]
    rows = list(by_day.values())
    models = sorted({r["model"] for r in rows})
    partial = period.partial_days
    for model in models:
        series: dict = {}  # output tokens by day (rows by project summed)
        for r in rows:
            if r["model"] == model:
                series[r["day"]] = series.get(r["day"], 0) + r["output_tokens"]
        fig.add_bar(
            x=list(series),
            y=list(series.values()),
            name=model,
            marker={
                "color": colour_of(model),
                "pattern": {"shape": [PARTIAL_PATTERN if day in partial else "" for day in series]},
            },
            customdata=["part of the day" if day in partial else "" for day in series],
            hovertemplate="%{x|%b %-d, %Y} %{customdata}<br>%{y:,} output tokens",
        )
    return fig


def figure_json(fig: go.Figure, *, points: Sequence[Mapping[str, list]] = ()) -> str:
    """The figure as Plotly JSON. Dates and times are handed to Plotly as the ISO 8601 text
    its encoder writes for them: `to_json` deep-copies the figure first, and copying a
    month of 15-minute samples as datetimes took 50 ms a chart (as text: 8 ms).

    `points`: for series too long for Plotly's object model (it checks and deep-copies every
    point: three lines of a month of 15-minute samples took 120 ms a chart), each trace's
    arrays by attribute ("x", "y"), in the order of `fig.data`, written into the figure's
    JSON as they are; the figure itself (its traces without those arrays, its layout and
    template) is checked and written by Plotly as any other."""
    for trace in fig.data:
        for axis in ("x", "y"):
            values = getattr(trace, axis, None)
            if values is not None and len(values):
                trace[axis] = _as_text(values)
    if not points:
        return fig.to_json()
    spec = fig.to_plotly_json()
    written: dict[int, Sequence] = {}  # an array several lines share is converted once
    for trace, arrays in zip(spec["data"], points, strict=True):
        for name, values in arrays.items():
            if id(values) not in written:
                written[id(values)] = _as_text(values)
            trace[name] = written[id(values)]
    return pio.to_json(spec, validate=False)


class FigureJson(str):
    """A figure's JSON that a template writes as its escaped text, made once with it (`of`)
    and kept with it: a month's capacity chart is 100 KB of JSON, escaped again for every
    view otherwise. It is the JSON text wherever a str is read."""

    escaped: str

    @classmethod
    def of(cls, text: str) -> "FigureJson":
        figure = cls(text)
        figure.escaped = escape(text)
        return figure

    def __html__(self) -> str:
        return self.escaped


def chart_json(chart: Callable[..., go.Figure], *args, **kwargs) -> str:
    """figure_json(chart(*args, **kwargs)) as FigureJson, kept (portal.kept): a chart draws
    what it is given and nothing else, so the same chart given the same values is the same
    JSON, and Plotly's object model (about 10 ms a figure) is skipped. The key names the
    values in full: plain data only (dicts, lists, text, numbers, Decimal, dates and
    times); a value of another kind is refused, as its text might not say all it holds."""
    key = json.dumps(
        [chart.__module__, chart.__qualname__, args, kwargs], default=_plain, sort_keys=True
    )
    return kept(key, lambda: FigureJson.of(figure_json(chart(*args, **kwargs))))


def _plain(value: object) -> list:
    if isinstance(value, Decimal):
        return ["Decimal", str(value)]
    if isinstance(value, date):  # a datetime too
        return [type(value).__name__, value.isoformat()]
    raise TypeError(f"{type(value).__name__} is not plain data: a chart's key names its values")


def _as_text(values: Sequence) -> Sequence:
    """Dates and times as ISO 8601 text; other values as they are."""
    if len(values) and isinstance(values[0], date):
        return [value.isoformat() for value in values]
    return values
