"""Market figures (kpis.md 4b), by hand: concentration, the quadrant, retention, cohorts."""

from datetime import UTC, datetime
from decimal import Decimal

from flywheel.domain.market import (
    ANCHOR,
    HIGHLY_CONCENTRATED,
    LONG_TAIL,
    MODERATELY_CONCENTRATED,
    PREMIUM,
    UNCONCENTRATED,
    VOLUME,
    cohorts,
    concentration,
    hhi_grade,
    quadrant,
    retention,
)

D = Decimal
OCT, NOV, DEC = (datetime(2026, m, 1, tzinfo=UTC) for m in (10, 11, 12))


def test_concentration_of_shares_half_three_tenths_a_fifth_is_highly_concentrated():
    # Given revenue 500, 300 and 200: shares 0.5, 0.3, 0.2
    result = concentration({"a": D(500), "b": D(300), "c": D(200)})
    # Then HHI = 0.25 + 0.09 + 0.04 = 0.38, above 0.18
    assert result.hhi == D("0.38")
    assert result.grade == HIGHLY_CONCENTRATED
    assert result.top1 == D("0.5")
    assert result.top5 == D(1)


def test_concentration_leaves_out_tenants_without_revenue():
    # A tenant whose credit notes exceed its usage has no share of the revenue
    result = concentration({"a": D(600), "b": D(400), "c": D(-50), "d": D(0)})
    assert (result.top1, result.hhi) == (D("0.6"), D("0.52"))
    assert concentration({"a": D(0)}) is None


def test_hhi_grades_follow_the_2023_merger_guidelines_at_their_bounds():
    assert hhi_grade(D("0.1801")) == HIGHLY_CONCENTRATED
    assert hhi_grade(D("0.18")) == MODERATELY_CONCENTRATED
    assert hhi_grade(D("0.10")) == MODERATELY_CONCENTRATED
    assert hhi_grade(D("0.0999")) == UNCONCENTRATED


def test_concentration_top5_of_ten_equal_tenants_is_half_and_unconcentrated():
    result = concentration({str(i): D(100) for i in range(10)})
    assert (result.top1, result.top5, result.hhi) == (D("0.1"), D("0.5"), D("0.1"))
    assert result.grade == MODERATELY_CONCENTRATED  # 0.10 is the moderate band's floor


def test_quadrant_splits_at_the_medians_and_a_tenant_at_a_median_is_high():
    # Given five tenants (revenue, paid tokens); 10 M paid tokens in all
    sales = {
        "big-cheap": (D(1000), 4_000_000),  # x 0.4, y 250 per million
        "big-dear": (D(1500), 3_000_000),  # x 0.3, y 500
        "middle": (D(400), 1_000_000),  # x 0.1, y 400: exactly at both medians
        "small-dear": (D(900), 1_000_000),  # x 0.1, y 900
        "small-cheap": (D(100), 1_000_000),  # x 0.1, y 100
    }
    result = quadrant(sales)
    # Then the medians are x 0.1 and y 400 per million, and ties are high
    assert (result.x_median, result.y_median) == (D("0.1"), D(400))
    labels = {p.tenant: p.label for p in result.points}
    assert labels == {
        "big-cheap": VOLUME,
        "big-dear": ANCHOR,
        "middle": ANCHOR,  # at both medians: high volume and high value
        "small-dear": ANCHOR,  # x 0.1 is the median: high
        "small-cheap": VOLUME,
    }
    # largest revenue first; y is revenue per million paid tokens
    assert [p.tenant for p in result.points][:2] == ["big-dear", "big-cheap"]
    assert next(p for p in result.points if p.tenant == "big-cheap").y == D(250)


def test_quadrant_names_all_four_quadrants():
    sales = {
        "anchor": (D(800), 400),  # x 0.4, y 2,000,000 per million
        "volume": (D(100), 400),  # x 0.4, y 250,000
        "premium": (D(200), 100),  # x 0.1, y 2,000,000
        "tail": (D(10), 100),  # x 0.1, y 100,000
    }
    result = quadrant(sales)
    # medians: x (0.1 + 0.4) / 2 = 0.25, y (250,000 + 2,000,000) / 2 = 1,125,000
    assert result.x_median == D("0.25")
    assert result.y_median == D(1_125_000)
    assert {p.tenant: p.label for p in result.points} == {
        "anchor": ANCHOR,
        "volume": VOLUME,
        "premium": PREMIUM,
        "tail": LONG_TAIL,
    }


def test_quadrant_places_no_tenant_without_paid_tokens():
    # A tenant whose revenue is a minimum's shortfall alone has no revenue per token
    result = quadrant({"a": (D(100), 1000), "b": (D(50), 0)})
    b = next(p for p in result.points if p.tenant == "b")
    assert (b.x, b.y, b.label) == (D(0), None, None)
    assert result.y_median == D(100_000)  # over the tenants with paid tokens


def test_retention_with_a_churned_and_an_expanding_tenant_by_hand():
    # Given M−L: a 100, b 200, c 300 (600); M: a 150 (expanded), b gone, c 270, d new 500
    base = {"a": D(100), "b": D(200), "c": D(300)}
    current = {"a": D(150), "c": D(270), "d": D(500)}
    nrr, grr = retention(base=base, current=current)
    # NRR = (150 + 0 + 270) / 600 = 0.7; the new tenant d does not count
    assert nrr == D("0.7")
    # GRR caps a at 100: (100 + 0 + 270) / 600 = 0.61666…
    assert grr == D("0.6166666666666666666666666666666667")  # 34 digits (KPI_CONTEXT)
    assert retention(base={}, current=current) == (None, None)


def test_cohorts_group_tenants_by_their_first_month_with_revenue():
    history = {
        "a": {OCT: D(100), NOV: D(120), DEC: D(50)},
        "b": {OCT: D(0), NOV: D(80), DEC: D(40)},  # no revenue in October: November's
        "c": {NOV: D(30), DEC: D(20)},
        "d": {OCT: D(10)},  # gone after October
    }
    window = {t: {m: v for m, v in months.items() if m >= NOV} for t, months in history.items()}
    table = cohorts(history=history, revenue=window, months=[NOV, DEC])
    assert [(c.month, c.tenants, c.revenue) for c in table] == [
        (OCT, 2, [D(120), D(50)]),  # a and d
        (NOV, 2, [D(110), D(60)]),  # b and c
    ]
