"""The capacity plan's domain (kpis.md 6c), by hand: the placement solved by HiGHS, the
demand to plan for, and a month's money by the section-5 formulas."""

from datetime import date
from decimal import Decimal, localcontext

from flywheel.domain.kpis import KPI_CONTEXT
from flywheel.domain.plan.capacity import (
    MonthDemand,
    PlanPool,
    month_demands,
    peak_ratio,
    plan_months,
)
from flywheel.domain.plan.placement import PoolRoom, Rate, place
from flywheel.domain.tfom import CostModel, gpu_hour_cost
from tests.flywheel.factories import cost_model_terms

D = Decimal
APRIL = date(2027, 4, 1)  # 30 days: 2,592,000 s, months(P) = 2,592,000 / 2,628,000


def _worked_example(h100=100, h200=100):
    pools = [
        PoolRoom("h100-a", "H100", h100, cost_per_gpu_hour=D("2.50"), capex_per_gpu=D(21900)),
        PoolRoom("h200-a", "H200", h200, cost_per_gpu_hour=D("3.50"), capex_per_gpu=D(30660)),
    ]
    rates = [Rate("m", "h100-a", D(2500)), Rate("m", "h200-a", D(4000))]
    return pools, rates


def test_the_worked_example_mixes_2_h200_and_2_h100_for_12_an_hour():
    pools, rates = _worked_example()
    placed = place(demand={"m": D(10000)}, pools=pools, rates=rates)
    assert placed.gpus == {("m", "h100-a"): 2, ("m", "h200-a"): 2}
    assert (placed.cost_per_hour, placed.capacity["m"], placed.unserved) == (D("12.00"), 10400, {})
    # Greedy by cost per token takes H200 (3.50 / 3,200 < 2.50 / 2,000): 4 of them, 14.00.
    assert 4 * D("3.50") == D("14.00") and D("3.50") / 3200 < D("2.50") / 2000


def test_without_room_or_purchases_the_plan_says_which_demand_cannot_be_served():
    pools, rates = _worked_example(h100=1, h200=2)
    placed = place(demand={"m": D(10000)}, pools=pools, rates=rates)
    # 1 x 2,000 + 2 x 3,200 = 8,400 tok/s at target_busy: 1,600 short.
    assert placed.gpus == {("m", "h100-a"): 1, ("m", "h200-a"): 2}
    assert placed.unserved == {"m": D(1600)}
    bought = place(demand={"m": D(10000)}, pools=pools, rates=rates, allow_purchase=True)
    # 1,600 tok/s more: one H100 (21,900 for 2,000) is cheaper capex than one H200 (30,660).
    assert (bought.added, bought.unserved, bought.cost_per_hour) == ({"h100-a": 1}, {}, D("12.00"))


def test_gpus_come_in_multiples_of_tp():
    pools, _ = _worked_example()
    placed = place(demand={"m": D(3000)}, pools=pools[:1], rates=[Rate("m", "h100-a", D(2500), 4)])
    assert placed.gpus == {("m", "h100-a"): 4}  # 2 GPUs would do, a replica takes 4


def test_cost_per_gpu_hour_at_target_busy():
    # 43,800 / 60 / 730 = 1.00; hosting 100 / 730; 1.2 kW x 1.25 x 0.10 x (0.8 + 0.3 x 0.2).
    cost = CostModel(**cost_model_terms(), network_storage_per_gpu_month=D(0))
    with localcontext(KPI_CONTEXT):
        expected = 1 + D(100) / 730 + D("0.15") * D("0.86")
    assert gpu_hour_cost(cost_model=cost, busy_share=D("0.8")) == expected


def test_peak_ratio_is_p95_over_mean_and_at_least_1():
    assert peak_ratio([0.0] * 10 + [10.0] * 10) == 2  # p95 10, mean 5
    assert peak_ratio([3.0] * 5) == 1
    assert peak_ratio([]) == 1


def test_a_month_plans_its_highest_day_at_the_band_and_sums_its_tokens():
    points = [[432e6, 400e6, 518.4e6, 390e6, 600e6]] * 30
    points[10] = [432e6, 400e6, 604.8e6, 390e6, 700e6]  # its peak day at p80: 7,000 tok/s
    demand = month_demands(
        history_start=date(2027, 3, 1), history=[1e6] * 31, forecast_start=APRIL,
        points=points, months=[date(2027, 3, 1), APRIL, date(2027, 5, 1)], ratio=D("1.25"),
    )  # fmt: skip
    assert demand[date(2027, 3, 1)] == MonthDemand(peak_tok_s=D(0), tokens=D("31e6"))
    assert demand[APRIL].peak_tok_s == D("604800000.0") / 86400 * D("1.25")  # 8,750
    assert demand[APRIL].tokens == D("12960000000.0")
    may = demand[date(2027, 5, 1)]  # beyond the forecast: its last week held flat
    assert (may.tokens, may.held_flat) == (D(31 * 432) * 10**6, True)


def _one_pool(installed: int, lead_time_months: int = 3):
    cost = CostModel(**cost_model_terms(), network_storage_per_gpu_month=D(0))
    pool = PlanPool("h100-a", "H100", installed, cost, lead_time_months=lead_time_months)
    return pool, [Rate("llama", "h100-a", D(1000))]


def test_a_one_pool_one_model_month_in_money_by_hand():
    pool, rates = _one_pool(installed=10)
    demand = {"llama": {APRIL: MonthDemand(peak_tok_s=D(7500), tokens=D(12_960_000_000))}}
    (month,) = plan_months(
        months=[APRIL], demand=demand, revenue_per_token={"llama": D("0.000002")},
        pools=[pool], rates=rates, monthly_opex=D(10000), target_busy=D("0.8"),
    )  # fmt: skip
    (row,) = month.pools
    # 7,500 tok/s at 1,000 x 0.8 per GPU: 10 GPUs, all installed.
    assert (row.needed, row.installed, row.add, row.release, row.order_by) == (10, 10, 0, 0, None)
    # Busy: 12.96e9 tokens / 1,000 = 12,960,000 GPU-s (5 GPUs), available 25,920,000.
    assert row.busy_gpus == 5
    # Energy: 1.2 x 1.25 x (12,960,000 + 0.3 x 12,960,000) / 3,600 = 7,020 kWh x 0.10.
    assert month.energy_cost == D(702)
    assert month.depreciation == D(7200)  # 10 x 730 x 2,592,000 / 2,628,000
    with localcontext(KPI_CONTEXT):
        hosting = D(10 * 100 * 2_592_000) / 2_628_000  # 986.30...
        opex = D(10000 * 2_592_000) / 2_628_000
        assert month.hosting == hosting
        assert month.cogs == 7200 + 702 + hosting
        assert month.ebitda == 25920 - 702 - hosting - opex
        assert month.gross_margin == (25920 - month.cogs) / 25920
    assert month.revenue == D(25920)  # 12.96e9 tokens x 2 per million
    assert round(month.ebitda, 2) == D("14368.68")


def test_lead_time_orders_the_additions_3_months_before_the_need():
    pool, rates = _one_pool(installed=4)
    demand = {"llama": {APRIL: MonthDemand(peak_tok_s=D(7500), tokens=D(0))}}
    (month,) = plan_months(
        months=[APRIL], demand=demand, revenue_per_token={}, pools=[pool], rates=rates,
        monthly_opex=D(0), target_busy=D("0.8"),
    )  # fmt: skip
    (row,) = month.pools
    assert (row.installed, row.needed, row.add, row.order_by) == (4, 10, 6, date(2027, 1, 1))
