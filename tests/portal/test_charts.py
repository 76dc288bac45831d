"""The charts' common layout: a day axis never labels a time of day; long series written
beside Plotly's object model give the same JSON."""

import json
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go

from metering.charts import capacity_chart
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
    whole = go.Figure(layout=base_layout(y_title="GPUs", x_title="Time (UTC)"))
    for trace, arrays in zip(figure.data, points, strict=True):
        whole.add_scatter(**trace.to_plotly_json(), **arrays)

    written = json.loads(figure_json(figure, points=points))

    assert written == json.loads(figure_json(whole))
    assert written["data"][2]["x"][1] == "2026-09-01T00:15:00+00:00"
    assert written["data"][2]["y"] == [0, 5, 3, 1, 6, 4]
    assert written["layout"]["template"]["data"]  # Plotly's template, as on every chart
