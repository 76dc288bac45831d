"""The charts' common layout: a day axis never labels a time of day."""

import plotly.graph_objects as go

from portal.charts import DAY_MS, base_layout


def test_a_day_axis_labels_dates_only_when_zoomed_below_a_day():
    day = go.Figure(layout=base_layout(y_title="Tokens"))
    hour = go.Figure(layout=base_layout(y_title="GPUs", x_title="Time (UTC)"))

    (stop,) = day.layout.xaxis.tickformatstops
    assert (tuple(stop.dtickrange), stop.value) == ((None, DAY_MS), "%b %-d, %Y")
    assert hour.layout.xaxis.tickformatstops == ()  # an hour axis keeps Plotly's times
