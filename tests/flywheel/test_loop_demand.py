"""Scenarios under the demand they state (kpis.md section 6, step 3), worked by hand on the
April pool of test_loop_scenarios: 10 GPUs through April 2026 (2,592,000 s, a calendar
month), C 25,920,000, A 23,328,000 (α 0.9), B 11,664,000 (β 0.5), std 9,331,200 (η 0.8),
σ 0.95, s 0.7, list value 10,000, revenue 7,000 (ρ 0.7); 1.2 kW × PUE 1.25 at 0.10 per kWh,
idle draw 30%; 730 depreciation, 100 hosting and 46 network per GPU-month."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest

from flywheel.domain.loop.baseline import measured_tfom
from flywheel.domain.loop.demand import (
    MEASURED,
    UNLIMITED,
    Demand,
    month_basis,
    per_month,
)
from flywheel.domain.loop.diagnosis import diagnose
from flywheel.domain.loop.growth import growth_series
from flywheel.domain.loop.levers import LeverEffect, LeverSpec
from flywheel.domain.loop.projection import project
from tests.flywheel.test_loop_scenarios import APRIL, MAY, _close, baseline_of, pool_inputs

D = Decimal
SECONDS = 2_592_000
MONTHS = Fraction(72, 73)  # April in months of 365/12 days


def kwh(available, busy) -> Fraction:
    return Fraction("1.2") * Fraction("1.25") * (busy + Fraction("0.3") * (available - busy)) / 3600


def lever(slug="l", *, pool=None, share="1", gpus_withdrawn=0, **factors) -> LeverSpec:
    return LeverSpec(
        slug=slug,
        effects=tuple(
            LeverEffect(factor=f, low=D(m), typical=D(m), high=D(m)) for f, m in factors.items()
        ),
        pool=pool,
        share=D(share),
        gpus_withdrawn=gpus_withdrawn,
    )


def test_measured_demand_without_levers_is_the_measured_period():
    baseline = baseline_of()

    projection = project(baseline=baseline, demand=MEASURED)

    assert projection.tfom == measured_tfom(baseline)
    assert [c.released for c in projection.capacity] == [0]


def test_efficiency_under_measured_demand_serves_the_same_tokens_with_fewer_busy_hours():
    baseline = baseline_of()
    measured = measured_tfom(baseline)

    projection = project(baseline=baseline, levers=[lever(efficiency="1.25")], demand=MEASURED)

    t = projection.tfom
    # B' = B × η / η' = 11,664,000 × 0.8 / 1.0 = 9,331,200: β 0.4, production and money stay.
    assert t.busy_gpu_seconds == 9_331_200 and _close(t.occupancy, Fraction("0.4"))
    assert _close(t.efficiency, 1)
    assert (t.tef, t.tfi, t.revenue) == (measured.tef, measured.tfi, measured.revenue)
    # Energy 6,318 kWh -> 5,637.6 kWh: 68.04 saved in the month, and that is the gain.
    assert _close(t.energy_kwh, kwh(23_328_000, 9_331_200)) and _close(t.energy_kwh, "5637.6")
    assert _close(projection.ebitda_gain_per_month, "68.04")
    # Two GPUs of ten are no longer needed at the measured occupancy: 10 × (1 − 0.8).
    (pool,) = projection.capacity
    assert _close(pool.released, 2) and _close(pool.headroom, "4.5")
    assert _close(pool.projected_headroom, Fraction(23_328_000 - 9_331_200, SECONDS))


def test_efficiency_under_unlimited_demand_sells_more_at_todays_prices():
    projection = project(
        baseline=baseline_of(), levers=[lever(efficiency="1.25")], demand=UNLIMITED
    )

    assert _close(projection.tfom.revenue, 8_750)  # 7,000 × 1.25
    assert projection.tfom.busy_gpu_seconds == 11_664_000
    assert [c.released for c in projection.capacity] == [0]


def test_availability_under_measured_demand_adds_idle_gpus_and_their_power():
    baseline = baseline_of()

    projection = project(baseline=baseline, levers=[lever(availability="1.1")], demand=MEASURED)

    t = projection.tfom
    assert _close(t.available_gpu_seconds, 25_660_800) and t.busy_gpu_seconds == 11_664_000
    assert t.revenue == measured_tfom(baseline).revenue
    # 291.6 kWh of idle power more: −29.16 in the month.
    assert _close(t.energy_kwh, kwh(25_660_800, 11_664_000))
    assert _close(projection.ebitda_gain_per_month, "-29.16")


def test_occupancy_has_nothing_to_act_on_under_measured_demand():
    baseline = baseline_of()

    by_target = project(baseline=baseline, targets={"occupancy": D("0.75")}, demand=MEASURED)
    by_lever = project(baseline=baseline, levers=[lever(occupancy="1.3")], demand=MEASURED)

    assert by_target.tfom == by_lever.tfom == measured_tfom(baseline)
    assert by_target.targets == {"occupancy": D("0.75")}  # what was asked, echoed


def test_withdrawn_gpus_save_their_depreciation_hosting_and_idle_power_from_the_formulas():
    baseline = baseline_of()
    measured = measured_tfom(baseline)

    projection = project(
        baseline=baseline, levers=[lever(pool="p1", gpus_withdrawn=4)], demand=MEASURED
    )

    t = projection.tfom
    # Six GPUs left: C 15,552,000, A 13,996,800; the demand still fits (capacity 11,197,440
    # std GPU-s for 9,331,200), so B and every sale stay, and β rises to 0.8333.
    assert t.calendar_gpu_seconds == 15_552_000 and _close(t.available_gpu_seconds, 13_996_800)
    assert _close(t.busy_gpu_seconds, 11_664_000) and _close(t.revenue, 7_000)
    energy_saved = (kwh(23_328_000, 11_664_000) - kwh(13_996_800, 11_664_000)) / 10
    assert _close(energy_saved, "116.64")
    assert _close(measured.depreciation - t.depreciation, 4 * 730 * MONTHS)  # 2,880
    assert _close(measured.hosting - t.hosting, 4 * 146 * MONTHS)  # 576
    assert _close(projection.ebitda_gain_per_month, energy_saved + 576)  # 692.64
    (pool,) = projection.capacity
    assert pool.withdrawn == 4 and _close(pool.projected_installed, 6) and pool.released == 0


def test_withdrawing_more_than_the_demand_leaves_loses_what_the_rest_cannot_serve():
    projection = project(
        baseline=baseline_of(), levers=[lever(pool="p1", gpus_withdrawn=7)], demand=MEASURED
    )

    # Three GPUs: A 6,998,400, all busy, produce 5,598,720 of the 9,331,200 std GPU-s asked.
    t = projection.tfom
    assert _close(t.occupancy, 1) and _close(t.std_gpu_seconds, 5_598_720)
    assert _close(t.revenue, 4_200)  # 7,000 × 0.6


def test_a_lever_scoped_to_a_pool_moves_that_pool_alone_by_its_share():
    baseline = baseline_of(pool_inputs("p1"), pool_inputs("p2"))

    whole = project(
        baseline=baseline, levers=[lever(pool="p1", efficiency="1.25")], demand=UNLIMITED
    )
    half = project(
        baseline=baseline,
        levers=[lever(pool="p1", share="0.5", efficiency="1.25")],
        demand=UNLIMITED,
    )

    assert _close(whole.pools[0].realized_revenue, 8_750)
    assert whole.pools[1] == baseline.pools[1].pool
    # Half of p1's production: η × (1 + 0.5 × 0.25) = 0.9, revenue 7,000 × 1.125.
    assert _close(half.pools[0].realized_revenue, 7_875)
    assert half.pools[1] == baseline.pools[1].pool


def test_growth_serves_demand_up_to_capacity_and_names_the_first_month_beyond_it():
    baseline = baseline_of()
    demand = Demand(kind="growth", growth_pct_per_month=D(10))

    series = growth_series(baseline=baseline, demand=demand)
    with_lever = growth_series(baseline=baseline, demand=demand, levers=[lever(efficiency="1.25")])

    # Capacity: A × η = 18,662,400 std GPU-s, twice the measured 9,331,200: 1.1^7 = 1.95
    # fits, 1.1^8 = 2.14 does not.
    assert series.first_month_over_capacity == 8 and series.pools_over_capacity == ("p1",)
    first, eighth, last = series.months[0], series.months[7], series.months[11]
    assert _close(first.projection.tfom.revenue, 7_700) and not first.is_over_capacity
    assert eighth.is_over_capacity and _close(eighth.served_tokens, 18_662_400 * 1000)
    assert _close(last.projection.tfom.revenue, 14_000)  # capped at capacity: 7,000 × 2
    assert _close(last.demand_tokens, Fraction(9_331_200_000) * Fraction("1.1") ** 12)
    # η × 1.25 lifts capacity to 2.5 × the measured demand: 1.1^10 = 2.59 is the first
    # month it serves short, yet the month without levers is still named.
    assert with_lever.first_month_over_capacity == 8
    assert [m.is_over_capacity for m in with_lever.months].index(True) == 9
    assert _close(with_lever.months[11].projection.tfom.revenue, 17_500)


def test_diagnosis_ranks_by_the_opportunity_and_shows_the_value_under_measured_demand():
    baseline = baseline_of()
    busy, eta_target = Fraction(11_664_000), Fraction("0.875")

    diagnosis = diagnose(baseline=baseline)

    efficiency = diagnosis.factor("efficiency")
    occupancy = diagnosis.factor("occupancy")
    sell = diagnosis.factor("sell_through")
    # η 0.8 -> 0.875 under measured demand: B' = B × 0.8 / 0.875, idle power on the rest.
    saved = (kwh(23_328_000, busy) - kwh(23_328_000, busy * Fraction("0.8") / eta_target)) / 10
    assert _close(efficiency.measured_demand_gain_per_month, saved)
    assert efficiency.ebitda_gain_per_month > efficiency.measured_demand_gain_per_month > 0
    assert occupancy.measured_demand_gain_per_month == 0 < occupancy.ebitda_gain_per_month
    assert sell.measured_demand_gain_per_month == sell.ebitda_gain_per_month > 0


def test_monthly_figures_are_the_calendar_months_or_per_30_4_day_month():
    week = APRIL + timedelta(days=7)

    assert per_month(D(700), start=APRIL, end=MAY) == 700
    assert month_basis(start=APRIL, end=MAY) == "calendar month"
    assert _close(per_month(D(700), start=APRIL, end=week), Fraction(700 * 365, 12 * 7))
    assert month_basis(start=APRIL, end=week) == "30.4-day month"
    mid = datetime(2026, 4, 15, tzinfo=UTC)
    assert month_basis(start=mid, end=datetime(2026, 5, 15, tzinfo=UTC)) == "30.4-day month"


@pytest.mark.parametrize(
    ("kind", "pct", "message"),
    [
        ("forecast", None, "demand must be one of"),
        ("growth", None, "needs growth_pct_per_month"),
        ("growth", D(101), "between -50 and 100"),
        ("measured", D(5), "applies to a growth demand only"),
    ],
)
def test_a_demand_outside_the_three_is_refused(kind, pct, message):
    with pytest.raises(ValueError, match=message):
        Demand(kind=kind, growth_pct_per_month=pct)


def _busy_factory():
    """40 GPUs through April, all healthy, β 0.55, η 0.8: C = A = 103,680,000 GPU-s,
    B = 57,024,000, std = 45,619,200; list value 10,000, revenue 7,000."""
    return baseline_of(pool_inputs(gpus=40, alpha="1", beta="0.55"))


def test_doubling_efficiency_under_measured_demand_halves_the_busy_time_exactly():
    baseline = _busy_factory()
    measured = measured_tfom(baseline)

    projection = project(baseline=baseline, levers=[lever(efficiency="2")], demand=MEASURED)

    t = projection.tfom
    assert t.revenue == measured.revenue == 7_000
    assert t.busy_gpu_seconds == 28_512_000 and t.occupancy == D("0.275")
    # 1.2 kW × 1.25 × (B + 0.3 (A − B)) / 3600: 71,020,800 -> 51,062,400 GPU-s of draw.
    assert measured.energy_kwh == 29_592 and t.energy_kwh == 21_276
    assert _close(projection.ebitda_gain_per_month, "831.6")  # 8,316 kWh at 0.10
    (pool,) = projection.capacity
    assert pool.released == 20  # 40 × (1 − 28,512,000 / 57,024,000)


def test_withdrawing_ten_gpus_saves_exactly_their_depreciation_hosting_and_idle_power():
    baseline = _busy_factory()
    measured = measured_tfom(baseline)

    projection = project(
        baseline=baseline, levers=[lever(pool="p1", gpus_withdrawn=10)], demand=MEASURED
    )

    t = projection.tfom
    assert t.revenue == 7_000 and t.busy_gpu_seconds == 57_024_000  # β 0.55 -> 0.7333
    assert measured.depreciation - t.depreciation == 10 * 730 * 72 / D(73)  # 7,200
    assert measured.hosting - t.hosting == 10 * 146 * 72 / D(73)  # 1,440
    # Their idle draw: 10 GPUs × 2,592,000 s × 30% × 1.2 kW × 1.25 / 3600 = 3,240 kWh.
    assert measured.energy_kwh - t.energy_kwh == 3_240
    assert _close(projection.ebitda_gain_per_month, 1_440 + 324)


def test_under_growth_a_faster_engine_earns_only_once_demand_outgrows_the_old_capacity():
    baseline = _busy_factory()
    demand = Demand(kind="growth", growth_pct_per_month=D(20))

    without = growth_series(baseline=baseline, demand=demand)
    faster = growth_series(baseline=baseline, demand=demand, levers=[lever(efficiency="2")])

    # Old capacity: A × η = 82,944,000 std GPU-s = 1 / 0.55 = 1.818 × today's demand;
    # 1.2^3 = 1.728 fits, 1.2^4 = 2.0736 does not.
    assert without.first_month_over_capacity == faster.first_month_over_capacity == 4
    revenue = [(m.projection.tfom.revenue, f.projection.tfom.revenue)
               for m, f in zip(without.months, faster.months, strict=True)]  # fmt: skip
    assert [_close(a, b) for a, b in revenue[:3]] == [True] * 3
    assert _close(revenue[0][0], 7_000 * Fraction("1.2"))
    assert _close(revenue[3][0], Fraction(7_000) / Fraction("0.55"))  # capped at capacity
    assert _close(revenue[3][1], 7_000 * Fraction("1.2") ** 4)  # the faster engine serves it
    assert all(b > a for a, b in revenue[3:])


def test_growth_splits_demand_across_pools_by_their_measured_production():
    # p2 produces three times p1 and has no headroom to spare (β 1): it saturates at once.
    baseline = baseline_of(
        pool_inputs("p1", alpha="1", beta="0.25"),
        pool_inputs("p2", gpus=30, alpha="1", beta="1", list_value="30000"),
    )
    demand = Demand(kind="growth", growth_pct_per_month=D(10))

    series = growth_series(baseline=baseline, demand=demand)

    first = series.months[0]
    p1, p2 = first.projection.pools
    assert _close(
        p1.production_tokens, Fraction(baseline.pools[0].pool.production_tokens) * Fraction("1.1")
    )
    assert p2.production_tokens == baseline.pools[1].pool.production_tokens  # at capacity
    assert series.first_month_over_capacity == 1 and series.pools_over_capacity == ("p2",)
    assert _close(first.demand_tokens, Fraction(
        baseline.pools[0].pool.production_tokens + baseline.pools[1].pool.production_tokens
    ) * Fraction("1.1"))  # fmt: skip
