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


def test_the_money_trend_draws_a_partial_month_as_an_open_point_never_a_dive():
    """October and November whole, December 129 hours: its bars hatched, its EBITDA and
    EBIT open points of their own that no line runs down to; the factor chart marks what
    the band column says (typical 20–35%, good from 40%, the 65% target)."""
    from decimal import Decimal
    from types import SimpleNamespace

    from flywheel.charts.tfom import trend_factor_chart, trend_money_chart
    from flywheel.selectors.tfom import TrendMonth

    def month(start, end, ebitda, *, tef, tfi):
        figures = SimpleNamespace(revenue=Decimal(9), cogs=Decimal(2), opex=Decimal(1),
                                  ebitda=Decimal(ebitda), ebit=Decimal(ebitda) - 1)  # fmt: skip
        return TrendMonth(month=start.replace(day=1, hour=0), start=start, end=end, tfom=figures,
                          tef=Decimal(tef), tfi=Decimal(tfi))  # fmt: skip

    oct_, nov, dec = (datetime(2026, m, 1, tzinfo=UTC) for m in (10, 11, 12))
    points = [
        month(oct_, nov, 7, tef="0.43", tfi="0.21"),
        month(nov, dec, 6, tef="0.44", tfi="0.22"),
        month(dec, datetime(2026, 12, 6, 9, tzinfo=UTC), 1, tef="0.42", tfi="0.12"),
    ]

    money = trend_money_chart(points, currency="USD")
    factors = trend_factor_chart(points)

    names = [(t.name, t.mode, t.showlegend) for t in money.data[3:]]
    assert names == [
        ("EBITDA", "lines+markers", None), ("EBITDA (partial month)", "markers", False),
        ("EBIT", "lines+markers", None), ("EBIT (partial month)", "markers", False),
    ]  # fmt: skip
    assert list(money.data[3].x) == ["Oct 2026", "Nov 2026", "Dec 2026 (129 h)"]
    assert list(money.data[3].y) == [7.0, 6.0, None]
    assert (list(money.data[4].x), list(money.data[4].y)) == (["Dec 2026 (129 h)"], [1.0])
    assert money.data[4].marker.symbol == "circle-open"
    assert list(money.data[0].marker.pattern.shape) == ["", "", "/"]
    # TEF and TFI too: December's first days (free allowances used first) are no dive.
    assert [(t.name, list(t.x), list(t.y)) for t in factors.data] == [
        ("TEF", ["Oct 2026", "Nov 2026", "Dec 2026 (129 h)"], [43.0, 44.0, None]),
        ("TEF (partial month)", ["Dec 2026 (129 h)"], [42.0]),
        ("TFI", ["Oct 2026", "Nov 2026", "Dec 2026 (129 h)"], [21.0, 22.0, None]),
        ("TFI (partial month)", ["Dec 2026 (129 h)"], [12.0]),
    ]
    assert [a.text for a in factors.layout.annotations] == [
        "typical TEF 20–35%; good from 40%", "excellent TFI 35–45%", "TEF target 65%",
    ]  # fmt: skip
