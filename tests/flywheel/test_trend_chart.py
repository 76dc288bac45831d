"""The daily trend explains its dips: month starts (free allowances used first) and
outages are marked, and a day without a figure is a gap, not a drop to 0%."""

from datetime import UTC, date, datetime

from flywheel.charts import trend_chart


def test_the_trend_marks_month_starts_and_outages_and_leaves_gaps():
    rows = [
        {"day": date(2026, 10, 31), "tef": 0.42, "tfi": 0.21},
        {"day": date(2026, 11, 1), "tef": 0.41, "tfi": 0.12},
        {"day": date(2026, 11, 2), "tef": None, "tfi": None},
    ]
    outage = (datetime(2026, 10, 31, 9, tzinfo=UTC), datetime(2026, 10, 31, 11, tzinfo=UTC),
              "DeepSeek pool partial outage")  # fmt: skip

    figure = trend_chart(rows, incidents=[outage])

    texts = [a.text for a in figure.layout.annotations]
    assert "month starts:<br>free allowances used first" in texts
    assert "incident: DeepSeek pool partial outage" in texts
    assert [s.type for s in figure.layout.shapes].count("rect") == 2  # the band and the outage
    tef = figure.data[0]
    assert list(tef.y) == [42.0, 41.0, None]
    # The axis spans the plotted days: Plotly does not stretch it to fit the labels' text.
    assert figure.layout.xaxis.range == ("2026-10-31 00:00", "2026-11-02 23:59")


def test_a_late_incidents_label_reads_leftwards_and_neighbours_are_staggered():
    rows = [{"day": date(2026, 11, day), "tef": 0.4, "tfi": 0.2} for day in range(1, 31)]
    early = (datetime(2026, 11, 3, 1, tzinfo=UTC), datetime(2026, 11, 3, 2, tzinfo=UTC), "a")
    late = (datetime(2026, 11, 25, 1, tzinfo=UTC), datetime(2026, 11, 25, 3, tzinfo=UTC), "b")

    figure = trend_chart(rows, incidents=[early, late])

    labels = {a.text: a for a in figure.layout.annotations if a.text.startswith("incident")}
    assert (labels["incident: a"].xanchor, labels["incident: a"].x) == (
        "left", "2026-11-03T01:00:00+00:00",
    )  # fmt: skip
    assert (labels["incident: b"].xanchor, labels["incident: b"].x) == (
        "right", "2026-11-25T03:00:00+00:00",
    )  # fmt: skip
    assert labels["incident: a"].y != labels["incident: b"].y
