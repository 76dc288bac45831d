"""Tests of the pure TFOM engine (kpis.md sections 4-5 and worked example 3 of section 7)."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flywheel.domain.kpis import CapacitySample, PoolInputs, integrate_capacity, kpis_compute
from flywheel.domain.tfom import (
    CostModel,
    FactoryCosts,
    PoolTfomInputs,
    pool_energy_kwh,
    tfom_compute,
)

CENT = Decimal("0.01")
APRIL = datetime(2026, 4, 1, tzinfo=UTC)
MAY = datetime(2026, 5, 1, tzinfo=UTC)  # 30 days: months(P) = 30 / (365 / 12) = 72/73


def _cents(amount: Decimal) -> Decimal:
    return amount.quantize(CENT)


def _close(value: Decimal | None, expected: Fraction) -> bool:
    """Ratios are checked to 1e-9 against the exact fraction worked out by hand."""
    return value is not None and abs(Fraction(value) - expected) <= Fraction(1, 10**9)


def _cost_model(**overrides) -> CostModel:
    fields = {
        "capex_per_gpu": Decimal(43_800),  # 730 per GPU-month over 60 months
        "depreciation_months": 60,
        "power_kw_per_gpu": Decimal("1.2"),
        "pue": Decimal("1.25"),
        "electricity_price_per_kwh": Decimal("0.10"),
        "hosting_per_gpu_month": Decimal(100),
        "network_storage_per_gpu_month": Decimal(46),
    }
    fields.update(overrides)
    return CostModel(**fields)


def _pool(slug: str, *, gpus: int, seconds: int, std: Decimal, **overrides) -> PoolInputs:
    """A pool of `gpus` GPUs, all healthy and busy, with `std` standard GPU-seconds."""
    calendar = Decimal(gpus * seconds)
    fields = {
        "pool": slug,
        "calendar_gpu_seconds": calendar,
        "available_gpu_seconds": calendar,
        "busy_gpu_seconds": calendar,
        "telemetry": "measured",
        "std_gpu_seconds": std,
        "production_tokens": std * 1000,
        "compliant_std_gpu_seconds": std,
        "compliant_paid_std_gpu_seconds": std,
        "output_tokens": int(std * 1000),
        "paid_output_tokens": int(std * 1000),
        "list_value": Decimal(0),
        "realized_revenue": Decimal(0),
    }
    fields.update(overrides)
    return PoolInputs(**fields)


NO_FACTORY_COSTS = FactoryCosts(staff_per_month=Decimal(0), sga_per_month=Decimal(0))


def _tfom(pools, *, start, end, factory_costs=NO_FACTORY_COSTS, **kwargs):
    kpis = kpis_compute(scope="factory", start=start, end=end, pools=[p.pool for p in pools])
    return tfom_compute(
        kpis=kpis,
        pools=pools,
        factory_costs=factory_costs,
        minimum_shortfall=kwargs.pop("minimum_shortfall", Decimal(0)),
        sla_credits=kwargs.pop("sla_credits", Decimal(0)),
        **kwargs,
    )


def test_tfom_compute_one_pool_one_month_every_figure():
    # Given 100 GPUs through April (2,592,000 s), 95 healthy and 60 busy all month,
    # R_ref 2,000, eta 0.8, sigma 0.98, s 0.75, rho 0.8
    capacity = integrate_capacity(
        samples=[CapacitySample(time=APRIL, installed=100, healthy=95, busy=60)],
        start=APRIL,
        end=MAY,
        gpu_count=100,
    )
    pool = PoolInputs(
        pool="h100-a",
        calendar_gpu_seconds=capacity.calendar_gpu_seconds,  # 259,200,000
        available_gpu_seconds=capacity.available_gpu_seconds,  # 246,240,000
        busy_gpu_seconds=capacity.busy_gpu_seconds,  # 155,520,000
        telemetry=capacity.telemetry,
        std_gpu_seconds=Decimal(124_416_000),  # 0.8 x B
        production_tokens=Decimal(248_832_000_000),  # x R_ref 2,000
        compliant_std_gpu_seconds=Decimal(121_927_680),  # 0.98 x std
        compliant_paid_std_gpu_seconds=Decimal(91_445_760),  # 0.75 x compliant
        output_tokens=248_832_000_000,
        paid_output_tokens=185_000_000_000,
        list_value=Decimal("370000.00"),  # 185,000 M paid output tokens at 2.00
        realized_revenue=Decimal("296000.00"),
        deployment_r_refs=(Decimal(2000),),
    )
    kpis = kpis_compute(scope="h100-a", start=APRIL, end=MAY, pools=[pool])
    factory_costs = FactoryCosts(staff_per_month=Decimal(73_000), sga_per_month=Decimal(36_500))

    # When
    tfom = tfom_compute(
        kpis=kpis,
        pools=[PoolTfomInputs(pool=pool, cost_model=_cost_model())],
        factory_costs=factory_costs,
        minimum_shortfall=Decimal("5000.00"),
        sla_credits=Decimal("1000.00"),
    )

    # Then: the KPI figures come through unchanged
    assert tfom.tef == Decimal("0.48")
    assert tfom.tfi == Decimal("0.28224")  # 0.48 x 0.98 x 0.75 x 0.8
    assert tfom.calendar_gpu_seconds == Decimal(259_200_000)
    assert tfom.tps == Decimal(96_000)
    assert tfom.theoretical_tps == Decimal(200_000)
    # energy: 1.2 kW x 1.25 x (155,520,000 + 0.3 x 90,720,000) / 3,600 = 76,140 kWh
    assert tfom.energy_kwh == Decimal(76_140)
    assert _cents(tfom.energy_cost) == Decimal("7614.00")
    # 100 GPUs x 43,800 / 60 months x 72/73 month; 100 x (100 + 46) x 72/73
    assert _cents(tfom.depreciation) == Decimal("72000.00")
    assert _cents(tfom.hosting) == Decimal("14400.00")
    assert _cents(tfom.cogs) == Decimal("94014.00")
    assert _cents(tfom.revenue) == Decimal("300000.00")  # 296,000 + 5,000 - 1,000
    assert _cents(tfom.gross_profit) == Decimal("205986.00")
    assert _close(tfom.gross_margin, Fraction(205_986, 300_000))  # 0.68662
    assert _cents(tfom.opex) == Decimal("108000.00")  # 109,500 x 72/73
    assert _cents(tfom.total_cost) == Decimal("202014.00")
    assert _cents(tfom.ebitda) == Decimal("169986.00")  # 300,000 - 7,614 - 14,400 - 108,000
    assert _cents(tfom.ebit) == Decimal("97986.00")
    assert _cents(tfom.capex_invested) == Decimal("4380000.00")
    # annualized over 365/30: EBIT 1,192,163; EBITDA 2,068,163; revenue 3,650,000
    assert _close(tfom.roi, Fraction(1_192_163, 4_380_000))  # 0.2721833333
    assert _close(tfom.payback_years, Fraction(4_380_000, 2_068_163))  # 2.1178214677
    assert _close(tfom.asset_turnover, Fraction(5, 6))
    assert _close(tfom.cost_per_million_tokens, Fraction(202_014, 248_832))  # 0.8118489583
    assert _close(tfom.cost_per_million_paid_tokens, Fraction(202_014, 185_000))
    assert _close(tfom.revenue_per_million_tokens, Fraction(300_000, 185_000))  # 1.6216216216
    assert _cents(tfom.daily_token_value_per_gpu) == Decimal("100.00")  # 300,000 / 100 / 30
    assert _close(tfom.tokens_per_kwh, Fraction(248_832_000_000, 76_140))  # 3,268,085.1063829787
    # equivalent GPUs: 100 x 0.48 / 0.30 = 160; avoided capex 60 x 43,800
    assert tfom.baseline_tef == Decimal("0.30")
    assert tfom.equivalent_gpus == Decimal(160)
    assert _cents(tfom.avoided_capex) == Decimal("2628000.00")


def test_tfom_compute_worked_example_3_equivalent_gpus_and_avoided_capex():
    # 1,000 B200 GPUs at TEF 0.65 over one hour, baseline_tef=0.30, capex 400,000
    pool = _pool("b200", gpus=1000, seconds=3600, std=Decimal(2_340_000))
    inputs = PoolTfomInputs(pool=pool, cost_model=_cost_model(capex_per_gpu=Decimal(400_000)))
    tfom = _tfom(
        [inputs], start=APRIL, end=APRIL + timedelta(hours=1), baseline_tef=Decimal("0.30")
    )
    assert tfom.tef == Decimal("0.65")
    assert _close(tfom.equivalent_gpus, Fraction(6500, 3))  # 2,166.666...
    assert tfom.equivalent_gpus.quantize(CENT) == Decimal("2166.67")
    # (2,166.666... - 1,000) x 400,000, unrounded, then shown to the cent
    assert abs(Fraction(tfom.avoided_capex) - Fraction(1_400_000_000, 3)) < Fraction(1, 10**20)
    assert _cents(tfom.avoided_capex) == Decimal("466666666.67")


def test_tfom_compute_avoided_capex_is_zero_at_or_below_baseline():
    at_baseline = _pool("a", gpus=10, seconds=3600, std=Decimal(10_800))  # TEF 0.30
    below = _pool("b", gpus=10, seconds=3600, std=Decimal(3_600))  # TEF 0.10
    for pool, equivalent in ((at_baseline, Decimal(10)), (below, Fraction(10, 3))):
        inputs = [PoolTfomInputs(pool=pool, cost_model=_cost_model())]
        tfom = _tfom(inputs, start=APRIL, end=APRIL + timedelta(hours=1))
        assert _close(tfom.equivalent_gpus, Fraction(equivalent))
        assert tfom.avoided_capex == 0


def test_tfom_compute_sums_equivalent_gpus_and_avoided_capex_per_pool():
    # pool a: 100 GPUs at TEF 0.6 -> 200 equivalent, 100 x 50,000 avoided;
    # pool b: 50 GPUs at TEF 0.15 -> 25 equivalent, nothing avoided (not -25 x 40,000).
    a = _pool("a", gpus=100, seconds=3600, std=Decimal(216_000))
    b = _pool("b", gpus=50, seconds=3600, std=Decimal(27_000))
    tfom = _tfom(
        [
            PoolTfomInputs(pool=a, cost_model=_cost_model(capex_per_gpu=Decimal(50_000))),
            PoolTfomInputs(pool=b, cost_model=_cost_model(capex_per_gpu=Decimal(40_000))),
        ],
        start=APRIL,
        end=APRIL + timedelta(hours=1),
    )
    assert tfom.tef == Decimal("0.45")  # factory: 243,000 / 540,000
    assert tfom.equivalent_gpus == Decimal(225)
    assert tfom.avoided_capex == Decimal(5_000_000)
    assert tfom.capex_invested == Decimal(7_000_000)


def test_tfom_compute_one_day_takes_its_share_of_monthly_costs():
    # months(P) = 1 / (365 / 12) = 12/365 for one day
    pool = _pool("a", gpus=10, seconds=86_400, std=Decimal(0))
    costs = FactoryCosts(staff_per_month=Decimal(30_000), sga_per_month=Decimal(6_500))
    inputs = [
        PoolTfomInputs(
            pool=pool,
            cost_model=_cost_model(
                capex_per_gpu=Decimal(36_500),
                depreciation_months=12,
                hosting_per_gpu_month=Decimal(365),
                network_storage_per_gpu_month=Decimal(0),
            ),
        )
    ]
    tfom = _tfom(inputs, start=APRIL, end=APRIL + timedelta(days=1), factory_costs=costs)
    assert tfom.opex == Decimal(1200)  # 36,500 x 12 / 365
    assert tfom.depreciation == Decimal(1000)  # 10 x 36,500 / 12 x 12 / 365
    assert tfom.hosting == Decimal(120)  # 10 x 365 x 12 / 365
    assert tfom.energy_cost == Decimal(36)  # 1.2 x 1.25 x 864,000 / 3,600 = 360 kWh at 0.10
    assert tfom.ebitda == Decimal(-1356)  # 0 - 36 - 120 - 1,200
    assert tfom.payback_years is None  # EBITDA <= 0
    # annualize(EBIT) = -2,356 x 365 over a capex of 10 x 36,500
    assert tfom.roi == Decimal("-2.356")
    assert tfom.asset_turnover == 0
    assert tfom.gross_margin is None  # no revenue
    assert tfom.revenue_per_million_tokens is None  # nothing paid
    assert tfom.cost_per_million_tokens is None  # nothing produced
    assert tfom.tef == 0 and tfom.tfi == 0


def test_pool_energy_kwh_uses_dcgm_energy_from_95_percent_coverage():
    cost = _cost_model()  # pue 1.25, node_power_factor 1.8
    common = {
        "cost_model": cost,
        "available_gpu_seconds": Decimal(36_000),
        "busy_gpu_seconds": Decimal(18_000),
        "measured_gpu_energy_kwh": Decimal(1000),
    }
    assert pool_energy_kwh(**common, measured_energy_coverage=Decimal("0.95")) == Decimal(2250)
    # below 95%: modelled, 1.2 x 1.25 x (18,000 + 0.3 x 18,000) / 3,600 = 9.75 kWh
    assert pool_energy_kwh(**common, measured_energy_coverage=Decimal("0.9499")) == Decimal("9.75")
    assert pool_energy_kwh(**common) == Decimal("9.75")


def test_tfom_compute_energy_cost_uses_each_pools_price():
    a = _pool("a", gpus=10, seconds=3600, std=Decimal(0))
    b = _pool("b", gpus=10, seconds=3600, std=Decimal(0))
    tfom = _tfom(
        [
            PoolTfomInputs(pool=a, cost_model=_cost_model()),
            PoolTfomInputs(
                pool=b,
                cost_model=_cost_model(electricity_price_per_kwh=Decimal("0.20")),
                measured_gpu_energy_kwh=Decimal(10),
                measured_energy_coverage=Decimal(1),
            ),
        ],
        start=APRIL,
        end=APRIL + timedelta(hours=1),
    )
    # a: 1.2 x 1.25 x 36,000 / 3,600 = 15 kWh at 0.10; b: 10 x 1.8 x 1.25 = 22.5 kWh at 0.20
    assert tfom.energy_kwh == Decimal("37.5")
    assert tfom.energy_cost == Decimal("6")


def test_tfom_compute_rejects_pools_that_do_not_match_the_kpis():
    pool = _pool("a", gpus=10, seconds=3600, std=Decimal(0))
    kpis = kpis_compute(scope="a", start=APRIL, end=APRIL + timedelta(hours=1), pools=[pool])
    with pytest.raises(ValueError, match="add up"):
        tfom_compute(
            kpis=kpis,
            pools=[],
            factory_costs=NO_FACTORY_COSTS,
            minimum_shortfall=Decimal(0),
            sla_credits=Decimal(0),
        )


def test_tfom_compute_rejects_a_non_positive_baseline_tef():
    pool = _pool("a", gpus=10, seconds=3600, std=Decimal(0))
    inputs = [PoolTfomInputs(pool=pool, cost_model=_cost_model())]
    with pytest.raises(ValueError, match="baseline_tef"):
        _tfom(inputs, start=APRIL, end=APRIL + timedelta(hours=1), baseline_tef=Decimal(0))


def test_tfom_as_dict_has_every_response_key():
    pool = _pool("a", gpus=10, seconds=3600, std=Decimal(0))
    inputs = [PoolTfomInputs(pool=pool, cost_model=_cost_model())]
    keys = set(_tfom(inputs, start=APRIL, end=APRIL + timedelta(hours=1)).as_dict())
    # GET /api/v1/tfom: the KPI keys plus these (architecture.md "Response shapes")
    assert keys >= {
        "scope", "from", "to", "telemetry", "calendar_gpu_seconds", "available_gpu_seconds",
        "busy_gpu_seconds", "std_gpu_seconds", "availability", "occupancy", "efficiency",
        "tef", "sla_delivery", "sell_through", "price_realization", "tfi", "output_tokens",
        "paid_output_tokens", "tps", "theoretical_tps", "list_value", "realized_revenue",
        "revenue", "energy_kwh", "energy_cost", "depreciation", "hosting", "cogs",
        "gross_profit", "gross_margin", "opex", "ebitda", "ebit", "roi", "payback_years",
        "asset_turnover", "cost_per_million_tokens", "revenue_per_million_tokens",
        "daily_token_value_per_gpu", "tokens_per_kwh", "baseline_tef", "equivalent_gpus",
        "avoided_capex",
    }  # fmt: skip


@settings(database=None, deadline=None, max_examples=150)
@given(
    gpus=st.integers(1, 5000),
    tef_permille=st.integers(0, 1000),
    revenue_cents=st.integers(0, 10**10),
    staff=st.integers(0, 10**6),
    hours=st.integers(1, 24 * 62),
)
def test_tfom_compute_profit_figures_add_up(gpus, tef_permille, revenue_cents, staff, hours):
    seconds = hours * 3600
    std = Decimal(gpus * seconds * tef_permille) / 1000
    revenue = Decimal(revenue_cents) / 100
    pool = _pool(
        "a", gpus=gpus, seconds=seconds, std=std, list_value=revenue, realized_revenue=revenue
    )
    costs = FactoryCosts(staff_per_month=Decimal(staff), sga_per_month=Decimal(0))
    tfom = _tfom(
        [PoolTfomInputs(pool=pool, cost_model=_cost_model())],
        start=APRIL,
        end=APRIL + timedelta(hours=hours),
        factory_costs=costs,
    )
    tolerance = Decimal("1e-9")
    assert abs(tfom.ebit - (tfom.revenue - tfom.total_cost)) <= tolerance
    assert abs(tfom.ebit - (tfom.gross_profit - tfom.opex)) <= tolerance
    assert abs(tfom.equivalent_gpus - gpus * tfom.tef / Decimal("0.30")) <= tolerance
    assert tfom.avoided_capex >= 0
    assert (tfom.payback_years is None) == (tfom.ebitda <= 0)
