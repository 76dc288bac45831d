"""The charts' common layout: a day axis never labels a time of day; long series written
beside Plotly's object model give the same JSON."""

import json
import socket
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest

from metering.charts import capacity_chart, changes
from portal.charts import DAY_MS, base_layout, figure_json


def test_a_day_axis_labels_dates_only_when_zoomed_below_a_day():
    day = go.Figure(layout=base_layout(y_title="Tokens"))
    hour = go.Figure(layout=base_layout(y_title="GPUs", x_title="Time (UTC)"))

    (stop,) = day.layout.xaxis.tickformatstops
    assert (tuple(stop.dtickrange), stop.value) == ((None, DAY_MS), "%b %-d, %Y")
    assert hour.layout.xaxis.tickformatstops == ()  # an hour axis keeps Plotly's times


def test_points_written_beside_the_figure_give_the_json_plotly_writes_for_them():
    """A capacity chart's points go into its JSON beside Plotly's object model, which would
    check and copy each one: the JSON is the one Plotly writes for the same figure (times as
    ISO 8601 text, the template, every trace's style), the shared times converted once."""
    start = datetime(2026, 9, 1, tzinfo=UTC)
    rows = [
        {"time": start + timedelta(minutes=15 * i), "installed": 8, "healthy": 8 - i % 2,
         "busy": (5 * i) % 7}
        for i in range(6)
    ]  # fmt: skip
    figure, points = capacity_chart(rows, "h100-a")
    whole = go.Figure(layout=figure.layout)
    for trace, arrays in zip(figure.data, points, strict=True):
        whole.add_scatter(**trace.to_plotly_json(), **arrays)

    written = json.loads(figure_json(figure, points=points))

    assert written == json.loads(figure_json(whole))
    assert written["data"][2]["x"][1] == "2026-09-01T00:15:00+00:00"
    assert written["data"][2]["y"] == [0, 5, 3, 1, 6, 4]
    assert written["layout"]["template"]["data"]  # Plotly's template, as on every chart


def test_a_step_line_keeps_the_points_where_it_changes_and_its_last():
    assert changes([2, 2, 3, 3, 3, 1]) == [0, 2, 5]
    assert changes([8] * 6) == [0, 5]  # drawn to the last sample
    assert changes([8, 7, 8, 7]) == [0, 1, 2, 3]
    assert changes([(8, 8, 2), (8, 8, 2), (8, 7, 2), (8, 7, 2)]) == [0, 2, 3]  # any of three
    assert changes([4]) == [0]
    assert changes([]) == []


def test_a_capacity_chart_draws_the_samples_where_any_line_changes():
    start = datetime(2026, 9, 1, tzinfo=UTC)
    rows = [
        {"time": start + timedelta(minutes=15 * i), "installed": 8, "healthy": h, "busy": b}
        for i, (h, b) in enumerate([(8, 2), (8, 2), (7, 2), (7, 5), (7, 5), (7, 5)])
    ]
    figure, points = capacity_chart(rows, "h100-a")

    at = [(start + timedelta(minutes=15 * i)) for i in (0, 2, 3, 5)]
    assert points == [
        {"x": at, "y": [8, 8, 8, 8]},
        {"x": at, "y": [8, 7, 7, 7]},
        {"x": at, "y": [2, 2, 5, 5]},
    ]
    assert figure.layout.hovermode == "x unified"  # one hover lists all three


def _counted(calls: list):
    def chart(rows: list[dict], *, title: str) -> go.Figure:
        calls.append(title)
        fig = go.Figure(layout=base_layout(y_title=title))
        fig.add_scatter(x=[r["day"] for r in rows], y=[r["tef"] for r in rows])
        return fig

    return chart


def test_a_chart_given_the_same_values_is_drawn_once_and_kept_as_plotly_writes_it(db):
    """chart_json keeps a chart's JSON under the chart and its values: the same values are
    drawn once; any value changed (a Decimal's last digit) draws it again."""
    from decimal import Decimal

    from portal.charts import chart_json

    calls: list = []
    chart = _counted(calls)
    rows = [{"day": datetime(2026, 9, 1, tzinfo=UTC).date(), "tef": Decimal("0.61")}]

    first = chart_json(chart, rows, title="TEF")
    again = chart_json(chart, [dict(rows[0])], title="TEF")
    changed = chart_json(chart, [{**rows[0], "tef": Decimal("0.62")}], title="TEF")

    assert first == again == figure_json(_counted([])(rows, title="TEF"))
    assert json.loads(changed)["data"][0]["y"] == [0.62]
    assert calls == ["TEF", "TEF"]


def test_a_chart_given_a_value_whose_text_may_not_name_it_in_full_is_refused(db):
    from portal.charts import chart_json

    class Row:  # its repr says nothing of what it holds
        tef = 1

    with pytest.raises(TypeError, match="Row is not plain data"):
        chart_json(_counted([]), [Row()], title="TEF")


def test_a_chart_is_drawn_without_the_cache_when_redis_is_down(db, settings):
    """A cache that does not answer (nothing listens at its port) slows a chart, never
    breaks its page."""
    from portal.charts import chart_json
    from portal.settings import redis_cache

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.CACHES = {"default": redis_cache(f"redis://127.0.0.1:{port}/0")}
    rows = [{"day": datetime(2026, 9, 1, tzinfo=UTC).date(), "tef": 0.5}]

    assert json.loads(chart_json(_counted([]), rows, title="TEF"))["data"][0]["y"] == [0.5]
