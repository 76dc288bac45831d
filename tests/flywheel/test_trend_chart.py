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
    assert "month starts: free allowances used first" in texts
    assert "incident: DeepSeek pool partial outage" in texts
    assert [s.type for s in figure.layout.shapes].count("rect") == 2  # the band and the outage
    tef = figure.data[0]
    assert list(tef.y) == [42.0, 41.0, None]
