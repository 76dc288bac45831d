"""The daily trend explains its dips: month starts (free allowances used first) and
outages are marked, and a day without a figure is a gap, not a drop to 0%."""

from datetime import UTC, date, datetime

from flywheel.charts.kpis import trend_chart


def test_the_trend_marks_month_starts_and_outages_and_leaves_gaps():
    rows = [
        {"day": date(2026, 10, 31), "tef": 0.42, "tfi": 0.21},
        {"day": date(2026, 11, 1), "tef": 0.41, "tfi": 0.12},
        {"day": date(2026, 11, 2), "tef": None, "tfi": None},
    ]
    outage = (datetime(2026, 10, 31, 9, tzinfo=UTC), datetime(2026, 10, 31, 11, tzinfo=UTC),
              "DeepSeek pool partial outage")  # fmt: skip

    figure = trend_chart(rows, incidents=[outage])

    # Marked by shapes that the legend explains, never by text on the plot.
    assert [a.text for a in figure.layout.annotations] == ["typical TEF 20–35%"]
    assert [s.type for s in figure.layout.shapes] == ["rect", "line", "rect"]  # band, 1 Nov, outage
    names = [trace.name for trace in figure.data]
    assert names == ["TEF", "TFI", "month start (free allowances used first)",
                     "incident (hover for its title)"]  # fmt: skip
    assert list(figure.data[3].hovertext) == ["incident: DeepSeek pool partial outage"]
    tef = figure.data[0]
    assert list(tef.y) == [42.0, 41.0, None]
    # The axis spans the plotted days: Plotly does not stretch it to fit the labels' text.
    assert figure.layout.xaxis.range == ("2026-10-31 00:00", "2026-11-02 23:59")


def test_without_month_starts_or_incidents_the_legend_names_only_the_lines():
    rows = [{"day": date(2026, 11, day), "tef": 0.4, "tfi": 0.2} for day in range(2, 30)]

    figure = trend_chart(rows)

    assert [trace.name for trace in figure.data] == ["TEF", "TFI"]
    assert [s.type for s in figure.layout.shapes] == ["rect"]  # the band alone
