"""Tests of the pure KPI engine (kpis.md sections 1-4 and the worked examples of section 7)."""

import decimal
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from flywheel.domain.kpis import (
    CapacitySample,
    PoolInputs,
    integrate_capacity,
    kpis_compute,
    pool_reference_rate,
    ratio_of,
    std_seconds,
)
from metering.domain.usage.production import production_tokens, production_weights

# No example database: the suite must leave nothing behind in the tree.
PROPERTY = settings(database=None, deadline=None, max_examples=150)

TOLERANCE = Decimal("1e-9")


def _close(value: Decimal | None, expected: Fraction) -> bool:
    """Ratios are checked to 1e-9 against the exact fraction worked out by hand."""
    return value is not None and abs(Fraction(value) - expected) <= Fraction(1, 10**9)


DAY = datetime(2026, 3, 2, tzinfo=UTC)


def _at(hours: float = 0, *, base: datetime = DAY) -> datetime:
    return base + timedelta(hours=hours)


def _sample(time: datetime, installed: int, healthy: int, busy: int, interval_s=None):
    return CapacitySample(
        time=time, interval_s=interval_s, installed=installed, healthy=healthy, busy=busy
    )


def _pool(**overrides) -> PoolInputs:
    """A pool of 10 GPUs over one hour, all busy, nothing produced, unless overridden."""
    fields = {
        "pool": "p",
        "calendar_gpu_seconds": Decimal(36_000),
        "available_gpu_seconds": Decimal(36_000),
        "busy_gpu_seconds": Decimal(36_000),
        "telemetry": "measured",
        "std_gpu_seconds": Decimal(0),
        "production_tokens": Decimal(0),
        "compliant_std_gpu_seconds": Decimal(0),
        "compliant_paid_std_gpu_seconds": Decimal(0),
        "output_tokens": 0,
        "paid_output_tokens": 0,
        "list_value": Decimal(0),
        "realized_revenue": Decimal(0),
        "deployment_r_refs": (),
    }
    fields.update(overrides)
    return PoolInputs(**fields)


def _pool_from_capacity(pool: str, capacity, **overrides) -> PoolInputs:
    return _pool(
        pool=pool,
        calendar_gpu_seconds=capacity.calendar_gpu_seconds,
        available_gpu_seconds=capacity.available_gpu_seconds,
        busy_gpu_seconds=capacity.busy_gpu_seconds,
        telemetry=capacity.telemetry,
        **overrides,
    )


# --- std(e) and tok(e) ---------------------------------------------------------------


def test_std_seconds_weights_uncached_input_by_w_in():
    # tok = 1000 + 0.25 * (3000 - 1000) = 1500 output-token units; 1500 / 500 = 3 GPU-s
    assert std_seconds(
        output_tokens=1000,
        input_tokens=3000,
        cached_tokens=1000,
        r_ref=Decimal(500),
        w_in=Decimal("0.25"),
    ) == Decimal(3)


def test_std_seconds_counts_only_output_when_w_in_is_zero():
    assert std_seconds(
        output_tokens=13_098_516_480,
        input_tokens=7,
        cached_tokens=0,
        r_ref=Decimal(1000),
        w_in=Decimal(0),
    ) == Decimal("13098516.48")


def test_std_seconds_rejects_non_positive_r_ref():
    with pytest.raises(ValueError, match="r_ref"):
        std_seconds(
            output_tokens=1, input_tokens=0, cached_tokens=0, r_ref=Decimal(0), w_in=Decimal(0)
        )


def test_production_tokens_rejects_cached_above_input():
    with pytest.raises(ValueError, match="cached"):
        production_tokens(output_tokens=1, input_tokens=5, cached_tokens=6, w_in=Decimal(1))


def test_production_weights_are_production_tokens_per_token():
    # tok = output + 0.35 x (input - cached): 1 per output, 0.35 per input, -0.35 per cached
    w_in = Fraction(7, 20)
    assert production_weights(w_in=w_in) == (1, Fraction(7, 20), Fraction(-7, 20))
    per_output, per_input, per_cached = production_weights(w_in=w_in)
    for output, input_tokens, cached in [(7, 11, 3), (0, 5, 5), (1_000_003, 2_000_017, 999_983)]:
        made = output * per_output + input_tokens * per_input + cached * per_cached
        assert made == production_tokens(
            output_tokens=output, input_tokens=input_tokens, cached_tokens=cached, w_in=w_in
        )


# --- capacity integration ------------------------------------------------------------


def test_integrate_capacity_worked_example_1_week_of_100_gpus():
    # 96 of 100 GPUs healthy all week; busy averages 46.08 = 48% of healthy: 47 GPUs for
    # 48,384 s (8% of the week), then 46.
    start, end = DAY, DAY + timedelta(hours=168)
    samples = [
        _sample(start, 100, 96, 47),
        _sample(start + timedelta(seconds=48_384), 100, 96, 46),
    ]
    totals = integrate_capacity(samples=samples, start=start, end=end, gpu_count=100)
    assert totals.calendar_gpu_seconds == Decimal(60_480_000)
    assert totals.available_gpu_seconds == Decimal(58_060_800)
    assert totals.busy_gpu_seconds == Decimal(27_869_184)
    assert totals.covered_seconds == Decimal(604_800)
    assert totals.telemetry == "measured"


def test_integrate_capacity_gpus_fail_then_return_mid_period():
    # 8 GPUs; 3 fail at 06:00; at 12:00 4 more are installed and 1 failed GPU is back;
    # at 18:00 everything is healthy again.
    samples = [
        _sample(_at(0), 8, 8, 6),
        _sample(_at(6), 8, 5, 5),
        _sample(_at(12), 12, 9, 7),
        _sample(_at(18), 12, 12, 10),
    ]
    totals = integrate_capacity(samples=samples, start=_at(0), end=_at(24), gpu_count=12)
    assert totals.calendar_gpu_seconds == Decimal((8 * 12 + 12 * 12) * 3600)  # 864,000
    assert totals.available_gpu_seconds == Decimal((8 + 5 + 9 + 12) * 6 * 3600)  # 734,400
    assert totals.busy_gpu_seconds == Decimal((6 + 5 + 7 + 10) * 6 * 3600)  # 604,800
    assert totals.telemetry == "measured"


def test_integrate_capacity_carries_last_sample_before_period_into_it():
    # The 22:00 sample of the day before holds until 06:00; the 12:00 one is superseded.
    samples = [
        _sample(_at(-12), 10, 9, 5),
        _sample(_at(-2), 10, 8, 4),
        _sample(_at(6), 10, 10, 7),
    ]
    totals = integrate_capacity(samples=samples, start=_at(0), end=_at(24), gpu_count=10)
    assert totals.calendar_gpu_seconds == Decimal(864_000)
    assert totals.available_gpu_seconds == Decimal((8 * 6 + 10 * 18) * 3600)  # 820,800
    assert totals.busy_gpu_seconds == Decimal((4 * 6 + 7 * 18) * 3600)  # 540,000
    assert totals.covered_seconds == Decimal(86_400)
    assert totals.telemetry == "measured"


def test_integrate_capacity_interval_gaps_are_partial_and_filled_with_gpu_count():
    start = _at(0)
    samples = [
        _sample(start, 10, 10, 4, interval_s=60),  # 00:00-00:01
        _sample(start + timedelta(minutes=10), 10, 9, 3, interval_s=600),  # 00:10-00:20
        _sample(start + timedelta(minutes=30), 8, 6, 2, interval_s=Decimal("90.5")),
    ]
    totals = integrate_capacity(samples=samples, start=start, end=_at(1), gpu_count=10)
    # covered 60 + 600 + 90.5 = 750.5 s; the other 2,849.5 s count 10 GPUs in each figure
    assert totals.covered_seconds == Decimal("750.5")
    assert totals.calendar_gpu_seconds == Decimal("35819")  # 600 + 6000 + 724 + 28495
    assert totals.available_gpu_seconds == Decimal("35038")  # 600 + 5400 + 543 + 28495
    assert totals.busy_gpu_seconds == Decimal("30716")  # 240 + 1800 + 181 + 28495
    assert totals.telemetry == "partial"


def test_integrate_capacity_interval_is_cut_short_by_the_next_sample():
    samples = [
        _sample(_at(0), 10, 10, 10, interval_s=7200),
        _sample(_at(0.5), 10, 10, 0),
    ]
    totals = integrate_capacity(samples=samples, start=_at(0), end=_at(1), gpu_count=10)
    assert totals.busy_gpu_seconds == Decimal(18_000)  # 10 GPUs busy for 1,800 s only


def test_integrate_capacity_expired_carry_in_leaves_period_uncovered():
    samples = [_sample(_at(-1), 4, 2, 1, interval_s=1800)]
    totals = integrate_capacity(samples=samples, start=_at(0), end=_at(1), gpu_count=10)
    assert totals.telemetry == "assumed"
    assert totals.busy_gpu_seconds == Decimal(36_000)


def test_integrate_capacity_without_samples_assumes_gpu_count():
    totals = integrate_capacity(samples=[], start=_at(0), end=_at(1), gpu_count=700)
    assert totals.calendar_gpu_seconds == Decimal(2_520_000)
    assert totals.available_gpu_seconds == Decimal(2_520_000)
    assert totals.busy_gpu_seconds == Decimal(2_520_000)
    assert totals.covered_seconds == Decimal(0)
    assert totals.telemetry == "assumed"


def test_integrate_capacity_ignores_samples_at_or_after_end():
    samples = [_sample(_at(1), 10, 0, 0), _sample(_at(2), 10, 0, 0)]
    totals = integrate_capacity(samples=samples, start=_at(0), end=_at(1), gpu_count=3)
    assert totals.available_gpu_seconds == Decimal(10_800)
    assert totals.telemetry == "assumed"


def test_integrate_capacity_sorts_samples_and_lets_a_repeated_time_replace():
    samples = [
        _sample(_at(0.5), 10, 10, 2),
        _sample(_at(0), 10, 10, 9),
        _sample(_at(0), 10, 10, 4),  # re-posted: replaces the 9
    ]
    totals = integrate_capacity(samples=samples, start=_at(0), end=_at(1), gpu_count=10)
    assert totals.busy_gpu_seconds == Decimal(4 * 1800 + 2 * 1800)


def test_integrate_capacity_keeps_sub_second_durations_exact():
    samples = [_sample(_at(0) + timedelta(microseconds=1), 3, 3, 3)]
    totals = integrate_capacity(samples=samples, start=_at(0), end=_at(1), gpu_count=1)
    # 1 GPU for 1 µs, then 3 GPUs for 3,599.999999 s
    assert totals.calendar_gpu_seconds == Decimal("10799.999998")
    assert totals.covered_seconds == Decimal("3599.999999")
    assert totals.telemetry == "partial"


def test_integrate_capacity_rejects_naive_or_empty_period():
    naive = datetime(2026, 3, 2)
    with pytest.raises(ValueError, match="aware"):
        integrate_capacity(samples=[], start=naive, end=naive + timedelta(hours=1), gpu_count=1)
    with pytest.raises(ValueError, match="end > start"):
        integrate_capacity(samples=[], start=_at(1), end=_at(1), gpu_count=1)


def test_capacity_sample_rejects_busy_above_healthy():
    with pytest.raises(ValueError, match="busy <= healthy"):
        _sample(_at(0), 10, 5, 6)


def test_pool_inputs_rejects_busy_above_available():
    with pytest.raises(ValueError, match="busy <= available"):
        _pool(available_gpu_seconds=Decimal(10), busy_gpu_seconds=Decimal(11))


# --- KPIs: worked examples -----------------------------------------------------------


def test_kpis_compute_worked_example_1_tef_is_0_216576():
    start, end = DAY, DAY + timedelta(hours=168)
    samples = [
        _sample(start, 100, 96, 47),
        _sample(start + timedelta(seconds=48_384), 100, 96, 46),
    ]
    capacity = integrate_capacity(samples=samples, start=start, end=end, gpu_count=100)
    output = 13_098_516_480
    std = std_seconds(
        output_tokens=output, input_tokens=0, cached_tokens=0, r_ref=Decimal(1000), w_in=Decimal(0)
    )
    pool = _pool_from_capacity(
        "h100",
        capacity,
        std_gpu_seconds=std,
        production_tokens=Decimal(output),
        output_tokens=output,
    )

    kpis = kpis_compute(scope="h100", start=start, end=end, pools=[pool])

    assert kpis.calendar_gpu_seconds == Decimal(60_480_000)
    assert kpis.available_gpu_seconds == Decimal(58_060_800)
    assert kpis.busy_gpu_seconds == Decimal(27_869_184)
    assert kpis.std_gpu_seconds == Decimal("13098516.48")
    assert kpis.availability == Decimal("0.96")
    assert kpis.occupancy == Decimal("0.48")
    assert kpis.efficiency == Decimal("0.47")
    assert kpis.tef == Decimal("0.216576")
    assert kpis.tps == Decimal("21657.6")  # 13,098,516,480 / 604,800 s
    assert kpis.theoretical_tps == Decimal(100_000)  # 100 GPUs x 1,000
    assert kpis.tps_per_gpu == Decimal("216.576")
    assert kpis.tpm == Decimal(1_299_456)
    assert kpis.telemetry == "measured"


def test_kpis_compute_worked_example_2_no_samples_tef_is_0_30():
    start, end = _at(0), _at(1)
    capacity = integrate_capacity(samples=[], start=start, end=end, gpu_count=700)
    output = 756_000_000
    pool = _pool_from_capacity(
        "b200",
        capacity,
        std_gpu_seconds=Decimal(output) / 1000,
        production_tokens=Decimal(output),
        output_tokens=output,
    )

    kpis = kpis_compute(scope="factory", start=start, end=end, pools=[pool])

    assert kpis.calendar_gpu_seconds == Decimal(2_520_000)
    assert kpis.tef == Decimal("0.3")
    assert kpis.tps == Decimal(210_000)
    assert kpis.theoretical_tps == Decimal(700_000)
    assert kpis.telemetry == "assumed"


def test_kpis_compute_worked_example_4_tfi_is_0_4090905():
    # TEF 0.65, sigma 0.999, s 0.70, rho 0.90 on 1,000 calendar GPU-seconds
    pool = _pool(
        calendar_gpu_seconds=Decimal(1000),
        available_gpu_seconds=Decimal(1000),
        busy_gpu_seconds=Decimal(1000),
        std_gpu_seconds=Decimal(650),
        production_tokens=Decimal(650_000),
        compliant_std_gpu_seconds=Decimal("649.35"),
        compliant_paid_std_gpu_seconds=Decimal("454.545"),
        list_value=Decimal("100.00"),
        realized_revenue=Decimal("90.00"),
    )
    kpis = kpis_compute(scope="p", start=_at(0), end=_at(1), pools=[pool])
    assert kpis.tef == Decimal("0.65")
    assert kpis.sla_delivery == Decimal("0.999")
    assert kpis.sell_through == Decimal("0.7")
    assert kpis.price_realization == Decimal("0.9")
    assert kpis.tfi == Decimal("0.4090905")


# --- KPIs: edge rules ----------------------------------------------------------------


def test_kpis_compute_nothing_produced_gives_zero_tef_and_tfi_and_null_ratios():
    pool = _pool(deployment_r_refs=(Decimal(1000), Decimal(2000)))
    kpis = kpis_compute(scope="p", start=_at(0), end=_at(1), pools=[pool])
    assert kpis.tef == 0
    assert kpis.tfi == 0
    assert kpis.efficiency == 0
    assert kpis.sla_delivery is None
    assert kpis.sell_through is None
    assert kpis.price_realization is None
    assert kpis.tps == 0
    # no production: R_ref(pool) is the plain mean 1,500 of its deployments, on 10 GPUs
    assert kpis.theoretical_tps == Decimal(15_000)


def test_kpis_compute_zero_capacity_gives_null_ratios():
    zero = Decimal(0)
    pool = _pool(calendar_gpu_seconds=zero, available_gpu_seconds=zero, busy_gpu_seconds=zero)
    kpis = kpis_compute(scope="p", start=_at(0), end=_at(1), pools=[pool])
    assert kpis.availability is None
    assert kpis.occupancy is None
    assert kpis.efficiency is None
    assert kpis.tps_per_gpu is None
    # No pool in service: TEF and TFI are null too; 0 only for pools in service that
    # produced nothing (kpis.md general rules; the next test).
    assert (kpis.tef, kpis.tfi) == (None, None)


def test_kpis_compute_in_service_and_nothing_produced_gives_zero_tef():
    kpis = kpis_compute(scope="p", start=_at(0), end=_at(1), pools=[_pool()])
    assert (kpis.tef, kpis.tfi) == (0, 0)


def test_kpis_compute_tfi_is_zero_when_nothing_compliant_was_sold():
    pool = _pool(std_gpu_seconds=Decimal(100), production_tokens=Decimal(100_000))
    kpis = kpis_compute(scope="p", start=_at(0), end=_at(1), pools=[pool])
    assert kpis.sla_delivery == 0
    assert kpis.sell_through is None
    assert kpis.tfi == 0


def test_kpis_compute_theoretical_tps_uses_production_weighted_pool_rate():
    # deployment 1: 3,000 tok at R_ref 1,000 (3 std-s); deployment 2: 1,000 tok at 500
    # (2 std-s). R_ref(pool) = 4,000 / 5 = 800, not the plain mean 750.
    busy = _pool(
        pool="a",
        std_gpu_seconds=Decimal(5),
        production_tokens=Decimal(4000),
        output_tokens=4000,
        deployment_r_refs=(Decimal(1000), Decimal(500)),
    )
    idle = _pool(
        pool="b",
        calendar_gpu_seconds=Decimal(14_400),  # 4 GPUs
        available_gpu_seconds=Decimal(14_400),
        busy_gpu_seconds=Decimal(0),
        deployment_r_refs=(Decimal(1000), Decimal(2000)),
    )
    undeployed = _pool(pool="c")
    assert pool_reference_rate(pool=busy) == Decimal(800)
    assert pool_reference_rate(pool=undeployed) is None
    kpis = kpis_compute(scope="factory", start=_at(0), end=_at(1), pools=[busy, idle, undeployed])
    assert kpis.theoretical_tps == Decimal(10 * 800 + 4 * 1500)


def test_kpis_compute_sums_every_figure_over_pools():
    a = _pool(
        pool="a",
        calendar_gpu_seconds=Decimal(1000),
        available_gpu_seconds=Decimal(900),
        busy_gpu_seconds=Decimal(600),
        std_gpu_seconds=Decimal(300),
        production_tokens=Decimal(300_000),
        compliant_std_gpu_seconds=Decimal(300),
        compliant_paid_std_gpu_seconds=Decimal(150),
        output_tokens=300_000,
        paid_output_tokens=200_000,
        list_value=Decimal("10.00"),
        realized_revenue=Decimal("8.00"),
        telemetry="measured",
    )
    b = _pool(
        pool="b",
        calendar_gpu_seconds=Decimal(3000),
        available_gpu_seconds=Decimal(3000),
        busy_gpu_seconds=Decimal(1500),
        std_gpu_seconds=Decimal(1500),
        production_tokens=Decimal(3_000_000),
        compliant_std_gpu_seconds=Decimal(1200),
        compliant_paid_std_gpu_seconds=Decimal(1200),
        output_tokens=3_000_000,
        paid_output_tokens=2_500_000,
        list_value=Decimal("30.00"),
        realized_revenue=Decimal("30.00"),
        telemetry="assumed",
    )
    kpis = kpis_compute(scope="factory", start=_at(0), end=_at(1), pools=[a, b])
    # pool TEFs 0.3 and 0.5: factory TEF is (1000 * 0.3 + 3000 * 0.5) / 4000, not 0.4
    assert kpis.tef == Decimal("0.45")
    assert kpis.availability == Decimal("0.975")  # 3900 / 4000
    assert _close(kpis.occupancy, Fraction(2100, 3900))
    assert _close(kpis.efficiency, Fraction(1800, 2100))
    assert _close(kpis.sla_delivery, Fraction(1500, 1800))
    assert kpis.sell_through == Decimal("0.9")  # 1350 / 1500
    assert kpis.price_realization == Decimal("0.95")  # 38 / 40
    assert kpis.tfi == Decimal("0.320625")  # 1350 / 4000 * 0.95
    assert kpis.output_tokens == 3_300_000
    assert kpis.paid_output_tokens == 2_700_000
    assert kpis.list_value == Decimal("40.00")
    assert kpis.realized_revenue == Decimal("38.00")
    assert kpis.telemetry == "partial"


def test_kpis_compute_telemetry_assumed_only_when_every_pool_is():
    pools = [_pool(pool="a", telemetry="assumed"), _pool(pool="b", telemetry="assumed")]
    assert kpis_compute(scope="f", start=_at(0), end=_at(1), pools=pools).telemetry == "assumed"
    pools = [_pool(pool="a"), _pool(pool="b", telemetry="partial")]
    assert kpis_compute(scope="f", start=_at(0), end=_at(1), pools=pools).telemetry == "partial"


def test_kpis_compute_rejects_a_pool_listed_twice():
    with pytest.raises(ValueError, match="once"):
        kpis_compute(scope="f", start=_at(0), end=_at(1), pools=[_pool(), _pool()])


def test_kpis_compute_ignores_the_callers_decimal_context():
    pool = _pool(std_gpu_seconds=Decimal(12_000), production_tokens=Decimal(12_000_000))
    with decimal.localcontext(decimal.Context(prec=3, rounding=decimal.ROUND_DOWN)):
        kpis = kpis_compute(scope="p", start=_at(0), end=_at(1), pools=[pool])
    # 34 significant digits, half-even: not the caller's 3 digits rounded down
    assert kpis.tef == Decimal("0." + "3" * 34)


def test_reservation_figures_over_two_pools_capacity_sold_at_most_one():
    # p: 36,000 available, 9,000 reserved, its cap 9,000 × 2,500 = 22.5 M tok of which 18 M
    # covered, and 20,000 std sold on demand; q: 36,000 available, all reserved, and 30,000
    # sold on demand besides (p's sold share 29,000 / 36,000; q alone would be past 1).
    p = _pool(reserved_gpu_seconds=Decimal(9_000), reserved_capacity=Decimal(22_500_000),
              covered_tokens=Decimal(18_000_000), compliant_paid_std_gpu_seconds=Decimal(20_000),
              compliant_std_gpu_seconds=Decimal(20_000), std_gpu_seconds=Decimal(20_000),
              on_demand_compliant_paid_std_gpu_seconds=Decimal(20_000))  # fmt: skip
    q = _pool(pool="q", reserved_gpu_seconds=Decimal(36_000),
              compliant_paid_std_gpu_seconds=Decimal(30_000),
              compliant_std_gpu_seconds=Decimal(30_000), std_gpu_seconds=Decimal(30_000),
              on_demand_compliant_paid_std_gpu_seconds=Decimal(30_000))  # fmt: skip

    alone = kpis_compute(scope="p", start=_at(0), end=_at(1), pools=[p])
    assert alone.reserved_gpu_seconds == 9_000
    assert alone.reserved_share == Decimal("0.25")
    assert alone.capacity_sold == ratio_of(29_000, 36_000)
    assert alone.reservation_utilization == Decimal("0.8")
    assert kpis_compute(scope="q", start=_at(0), end=_at(1), pools=[q]).capacity_sold == 1
    both = kpis_compute(scope="f", start=_at(0), end=_at(1), pools=[p, q])
    assert both.reserved_share == Decimal(45_000) / Decimal(72_000)
    assert both.capacity_sold == 1  # (45,000 + 50,000) / 72,000, capped
    assert both.reservation_utilization == Decimal("0.8")  # q's cap unknown: 0 tok
    nothing = kpis_compute(scope="p", start=_at(0), end=_at(1), pools=[_pool()])
    assert nothing.reserved_share == 0 and nothing.reservation_utilization is None


def test_kpis_as_dict_uses_the_response_keys():
    kpis = kpis_compute(scope="p", start=_at(0), end=_at(1), pools=[_pool()])
    # GET /api/v1/kpis keys (architecture.md), then the extras tps_per_gpu and tpm
    assert list(kpis.as_dict()) == [
        "scope", "from", "to", "telemetry", "calendar_gpu_seconds", "available_gpu_seconds",
        "busy_gpu_seconds", "std_gpu_seconds", "availability", "occupancy", "efficiency",
        "tef", "sla_delivery", "sell_through", "price_realization", "tfi", "output_tokens",
        "paid_output_tokens", "tps", "theoretical_tps", "list_value", "realized_revenue",
        "tps_per_gpu", "tpm", "reserved_gpu_seconds", "reserved_share", "capacity_sold",
        "reservation_utilization",
    ]  # fmt: skip
    assert kpis.as_dict()["from"] == _at(0)


# --- properties ----------------------------------------------------------------------


@st.composite
def pool_inputs(draw, slug: str = "p") -> PoolInputs:
    """Any consistent pool: B <= A <= C, compliant paid <= compliant <= std, realized <= list."""
    milli = Decimal("0.001")
    calendar = draw(st.integers(0, 10**12))
    available = draw(st.integers(0, calendar))
    busy = draw(st.integers(0, available))
    std = draw(st.integers(0, 3 * busy + 10))  # eta may exceed 1 (stale R_ref)
    compliant = draw(st.integers(0, std))
    compliant_paid = draw(st.integers(0, compliant))
    list_cents = draw(st.integers(0, 10**11))
    realized_cents = draw(st.integers(0, list_cents))
    return _pool(
        pool=slug,
        calendar_gpu_seconds=calendar * milli,
        available_gpu_seconds=available * milli,
        busy_gpu_seconds=busy * milli,
        std_gpu_seconds=std * milli,
        production_tokens=std * milli * 1000,
        compliant_std_gpu_seconds=compliant * milli,
        compliant_paid_std_gpu_seconds=compliant_paid * milli,
        list_value=Decimal(list_cents) / 100,
        realized_revenue=Decimal(realized_cents) / 100,
    )


@st.composite
def factories(draw) -> list[PoolInputs]:
    count = draw(st.integers(1, 4))
    return [draw(pool_inputs(slug=f"p{index}")) for index in range(count)]


@PROPERTY
@given(pools=factories())
def test_kpis_compute_tef_is_alpha_beta_eta_and_tfi_is_tef_sigma_s_rho(pools):
    kpis = kpis_compute(scope="factory", start=_at(0), end=_at(1), pools=pools)
    factors = (kpis.availability, kpis.occupancy, kpis.efficiency)
    if None not in factors:
        alpha, beta, eta = factors
        assert abs(kpis.tef - alpha * beta * eta) <= TOLERANCE
    commercial = (kpis.tef, kpis.sla_delivery, kpis.sell_through, kpis.price_realization)
    if None not in commercial:
        tef, sigma, sell, rho = commercial
        assert abs(kpis.tfi - tef * sigma * sell * rho) <= TOLERANCE


@PROPERTY
@given(pools=factories())
def test_kpis_compute_bounded_factors_stay_within_0_and_1(pools):
    kpis = kpis_compute(scope="factory", start=_at(0), end=_at(1), pools=pools)
    for factor in (
        kpis.availability,
        kpis.occupancy,
        kpis.sla_delivery,
        kpis.sell_through,
        kpis.price_realization,
    ):
        assert factor is None or 0 <= factor <= 1
    assert kpis.efficiency is None or kpis.efficiency >= 0


@PROPERTY
@given(pools=factories())
def test_kpis_compute_factory_tef_is_the_calendar_weighted_mean_of_pool_tefs(pools):
    factory = kpis_compute(scope="factory", start=_at(0), end=_at(1), pools=pools)
    # A pool TEF exists only where the pool has calendar time.
    assume(all(p.calendar_gpu_seconds > 0 for p in pools))
    calendar = sum(p.calendar_gpu_seconds for p in pools)
    std = sum(p.std_gpu_seconds for p in pools)
    assert abs(factory.tef - std / calendar) <= TOLERANCE
    weighted = sum(
        p.calendar_gpu_seconds * kpis_compute(scope=p.pool, start=_at(0), end=_at(1), pools=[p]).tef
        for p in pools
        if p.calendar_gpu_seconds > 0
    )
    assert abs(factory.tef - weighted / calendar) <= TOLERANCE


@st.composite
def capacity_samples(draw) -> list[CapacitySample]:
    samples = []
    for _ in range(draw(st.integers(0, 8))):
        installed = draw(st.integers(0, 20))
        healthy = draw(st.integers(0, installed))
        samples.append(
            _sample(
                _at(0) + timedelta(seconds=draw(st.integers(-300, 900))),
                installed,
                healthy,
                draw(st.integers(0, healthy)),
                interval_s=draw(st.one_of(st.none(), st.integers(1, 400))),
            )
        )
    return samples


def _reference_totals(samples, seconds: int, gpu_count: int) -> tuple[int, int, int, int]:
    """Second-by-second integration: the latest sample at or before t rules, while it lasts."""
    latest = {s.time: s for s in samples}
    ordered = sorted(latest.values(), key=lambda s: s.time)
    totals = [0, 0, 0, 0]
    for second in range(seconds):
        instant = _at(0) + timedelta(seconds=second)
        ruling = [s for s in ordered if s.time <= instant]
        sample = ruling[-1] if ruling else None
        if sample and (
            sample.interval_s is None
            or instant < sample.time + timedelta(seconds=sample.interval_s)
        ):
            values = (sample.installed, sample.healthy, sample.busy, 1)
        else:
            values = (gpu_count, gpu_count, gpu_count, 0)
        totals = [total + value for total, value in zip(totals, values, strict=True)]
    return tuple(totals)


@PROPERTY
@given(samples=capacity_samples(), gpu_count=st.integers(0, 20))
def test_integrate_capacity_matches_second_by_second_reference(samples, gpu_count):
    seconds = 600
    totals = integrate_capacity(
        samples=samples, start=_at(0), end=_at(0) + timedelta(seconds=seconds), gpu_count=gpu_count
    )
    calendar, available, busy, covered = _reference_totals(samples, seconds, gpu_count)
    assert totals.calendar_gpu_seconds == calendar
    assert totals.available_gpu_seconds == available
    assert totals.busy_gpu_seconds == busy
    assert totals.covered_seconds == covered
    expected = "measured" if covered == seconds else "assumed" if covered == 0 else "partial"
    assert totals.telemetry == expected
