"""The pure scenario engine (kpis.md section 6, steps 3-4): projections worked out by hand,
caps, lever multipliers, goal checks, the cheapest lever set against a brute force, and the
learning rule of lever multipliers.

The April pool: 10 GPUs through April 2026 (30 days, 2,592,000 s; one calendar month, so
its figures are its monthly figures):
C = 25,920,000 GPU-s, α 0.9, β 0.5, η 0.8, σ 0.95, s 0.7, list value 10,000 and ρ 0.7
(TFI = 0.16758); 1.2 kW per GPU, PUE 1.25, 0.10 per kWh, idle draw 30%.
"""

import itertools
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction

import pytest

from flywheel.domain.kpis import PoolInputs
from flywheel.domain.loop.baseline import Baseline, measured_tfom
from flywheel.domain.loop.demand import MEASURED, UNLIMITED, per_month
from flywheel.domain.loop.goals import GoalSpec, cheapest_lever_set, goal_check
from flywheel.domain.loop.levers import (
    LeverEffect,
    LeverSpec,
    lever_multipliers,
    multiplier_blend,
    realized_split,
)
from flywheel.domain.loop.projection import project
from flywheel.domain.tfom import CostModel, FactoryCosts, PoolTfomInputs
from tests.flywheel.factories import cost_model_terms

APRIL = datetime(2026, 4, 1, tzinfo=UTC)
MAY = datetime(2026, 5, 1, tzinfo=UTC)
D = Decimal


def _close(value, expected, tolerance=Fraction(1, 10**12)) -> bool:
    return value is not None and abs(Fraction(value) - Fraction(expected)) <= tolerance


def _cost_model() -> CostModel:
    return CostModel(**cost_model_terms(), network_storage_per_gpu_month=D(46))


def pool_inputs(slug="p1", *, gpus=10, alpha="0.9", beta="0.5", eta="0.8", sigma="0.95", sell="0.7",
          list_value="10000", rho="0.7") -> PoolInputs:  # fmt: skip
    calendar = D(gpus * 2_592_000)
    available = calendar * D(alpha)
    busy = available * D(beta)
    std = busy * D(eta)
    compliant = std * D(sigma)
    paid = compliant * D(sell)
    return PoolInputs(
        pool=slug,
        calendar_gpu_seconds=calendar,
        available_gpu_seconds=available,
        busy_gpu_seconds=busy,
        telemetry="measured",
        std_gpu_seconds=std,
        production_tokens=std * 1000,
        compliant_std_gpu_seconds=compliant,
        compliant_paid_std_gpu_seconds=paid,
        output_tokens=int(std * 1000),
        paid_output_tokens=int(paid * 1000),
        list_value=D(list_value),
        realized_revenue=D(list_value) * D(rho),
    )


def baseline_of(*pools: PoolInputs, staff="7300", sga="3650") -> Baseline:
    return Baseline(
        start=APRIL,
        end=MAY,
        pools=tuple(
            PoolTfomInputs(pool=p, cost_model=_cost_model()) for p in pools or (pool_inputs(),)
        ),
        factory_costs=FactoryCosts(staff_per_month=D(staff), sga_per_month=D(sga)),
    )


def _lever(slug, cost="0", monthly="0", **factors) -> LeverSpec:
    return LeverSpec(
        slug=slug,
        effects=tuple(
            LeverEffect(factor=f, low=D(m) * D("0.9"), typical=D(m), high=D(m) * D("1.1"))
            for f, m in factors.items()
        ),
        one_time_cost=D(cost),
        monthly_cost=D(monthly),
    )


def test_project_without_levers_or_targets_is_the_measured_period():
    baseline = baseline_of()

    projection = project(baseline=baseline)

    assert projection.tfom == measured_tfom(baseline)
    assert projection.ebitda_gain_per_month == 0
    assert _close(projection.tfom.tfi, Fraction("0.16758"))


def test_project_occupancy_target_moves_energy_and_revenue_by_hand():
    baseline = baseline_of()
    measured = measured_tfom(baseline)

    projection = project(baseline=baseline, targets={"occupancy": D("0.75")}, demand=UNLIMITED)

    t = projection.tfom
    assert t.occupancy == D("0.75")
    assert (t.availability, t.efficiency, t.sla_delivery) == (
        measured.availability,
        measured.efficiency,
        measured.sla_delivery,
    )
    assert _close(t.sell_through, Fraction("0.7")) and _close(t.price_realization, Fraction("0.7"))
    assert t.busy_gpu_seconds == 17_496_000
    assert _close(t.tfi, Fraction("0.25137"))  # TFI x 1.5
    # Revenue scales with TFI: 7,000 -> 10,500.
    assert _close(t.revenue, 10_500)
    # Energy: 1.2 kW x 1.25 x (B + 0.3 (A - B)) / 3600 at 0.10: 6,318 kWh -> 8,019 kWh.
    assert _close(measured.energy_kwh, 6318) and _close(t.energy_kwh, 8019)
    # EBITDA +3,500 - 170.10 over April = 3,329.90 in the month.
    assert _close(projection.ebitda_gain_per_month, Fraction("3329.90"))


def test_project_lever_multipliers_multiply_and_cap_at_one():
    baseline = baseline_of()
    levers = [
        _lever("a", availability="1.05", occupancy="1.2"),
        _lever("b", occupancy="1.5"),
        _lever("c", efficiency="1.5", occupancy="1.5"),
    ]

    two = project(baseline=baseline, levers=levers[:2], demand=UNLIMITED)
    three = project(baseline=baseline, levers=levers, demand=UNLIMITED)

    assert lever_multipliers(levers[:2])["occupancy"] == D("1.8")
    assert _close(two.tfom.occupancy, Fraction("0.9"))  # 0.5 x 1.2 x 1.5
    assert three.tfom.occupancy == 1  # 0.5 x 2.7 = 1.35: capped at 1
    assert _close(three.tfom.availability, Fraction("0.945"))  # 0.9 x 1.05
    assert _close(three.tfom.efficiency, Fraction("1.2"))  # η is not capped: 0.8 x 1.5


def test_project_caps_a_capped_factor_and_keeps_eta_uncapped():
    baseline = baseline_of()

    capped = project(baseline=baseline, levers=[_lever("x", sell_through="2")])
    uncapped = project(baseline=baseline, levers=[_lever("y", efficiency="2")])

    assert capped.tfom.sell_through == 1
    assert _close(uncapped.tfom.efficiency, Fraction("1.6"))


def test_project_targets_replace_the_measured_value_then_levers_multiply():
    baseline = baseline_of()

    projection = project(
        baseline=baseline,
        targets={"price_realization": D("0.8")},
        levers=[_lever("discounts", price_realization="1.1")],
    )

    assert _close(projection.tfom.price_realization, Fraction("0.88"))
    assert _close(projection.tfom.revenue, 8_800)


def test_project_lever_monthly_cost_is_opex_and_one_time_cost_is_apart():
    baseline = baseline_of()
    measured = measured_tfom(baseline)

    projection = project(
        baseline=baseline, levers=[_lever("people", cost="5000", monthly="730", sell_through="1")]
    )

    # 730 a month over 30 days = 720 more opex (TFOM's months(P)); nothing else moves. April
    # is a calendar month: its monthly figure is the month's, -720.
    assert _close(projection.tfom.opex - measured.opex, 720)
    assert _close(projection.ebitda_gain_per_month, -720)
    assert projection.one_time_cost == 5000 and projection.cost == 5000 + 12 * 730


def test_project_spreads_a_factor_over_pools_within_zero_and_one():
    strong = pool_inputs("strong", alpha="0.99", beta="0.95")
    weak = pool_inputs("weak", gpus=30, alpha="0.8", beta="0.3")
    baseline = baseline_of(strong, weak)
    measured = measured_tfom(baseline)

    raised = project(
        baseline=baseline,
        targets={"occupancy": D("0.9"), "availability": D("0.97")},
        demand=UNLIMITED,
    )
    lowered = project(baseline=baseline, targets={"occupancy": D("0.2")}, demand=UNLIMITED)

    t = raised.tfom
    assert _close(t.availability, Fraction("0.97")) and _close(t.occupancy, Fraction("0.9"))
    assert _close(t.efficiency, Fraction(measured.efficiency))  # held at its measured value
    # Gaps to 1 shrink in proportion: the strong pool stays below 1, never above.
    for pool in raised.pools:
        assert 0 <= pool.busy_gpu_seconds <= pool.available_gpu_seconds <= pool.calendar_gpu_seconds
    strong_after = raised.pools[0]
    assert strong_after.busy_gpu_seconds < strong_after.available_gpu_seconds
    assert _close(lowered.tfom.occupancy, Fraction("0.2"))
    # Lowering scales every pool's ratio by the same factor: 0.95 x 0.2 / β.
    ratio = lowered.pools[0].busy_gpu_seconds / lowered.pools[0].available_gpu_seconds
    assert _close(ratio, Fraction("0.95") * Fraction("0.2") / Fraction(measured.occupancy))


def test_project_refuses_a_capped_target_above_one():
    with pytest.raises(ValueError, match="between 0 and 1"):
        project(baseline=baseline_of(), targets={"sell_through": D("1.2")})


def test_goal_check_compares_each_criterion():
    baseline = baseline_of()
    tfom = measured_tfom(baseline)
    ebitda = per_month(tfom.ebitda, start=APRIL, end=MAY)

    check = goal_check(
        goal=GoalSpec(min_gross_margin=D("0.5"), min_ebitda_per_month=ebitda, min_tfi=D("0.2")),
        tfom=tfom,
        start=APRIL,
        end=MAY,
    )

    assert [(c.key, c.is_met) for c in check.criteria] == [
        ("gross_margin", tfom.gross_margin >= D("0.5")),
        ("ebitda_per_month", True),
        ("tfi", False),  # 0.16758 < 0.2
    ]
    assert not check.is_met


CATALOGUE = [
    _lever("pool-sched", cost="180000", monthly="20000", occupancy="1.2"),
    _lever("pd", cost="250000", monthly="15000", occupancy="1.08", sla_delivery="1.01"),
    _lever("spec", cost="60000", monthly="5000", efficiency="1.05", sla_delivery="1.008"),
    _lever("prefix", cost="30000", monthly="2000", efficiency="1.08", price_realization="0.99"),
    _lever("fp8", cost="40000", efficiency="1.02"),
    _lever("paged", cost="15000", efficiency="1.03"),
    _lever("trial", cost="20000", monthly="30000", sell_through="1.15"),
    _lever("discounts", cost="10000", monthly="15000", price_realization="1.12"),
    _lever("failover", cost="80000", monthly="10000", availability="1.01", sla_delivery="1.01"),
    _lever("batching", cost="10000", efficiency="1", occupancy="1"),
]


def _big_baseline() -> Baseline:
    """A factory whose revenue dwarfs the lever costs: 2,000 GPUs, 10 M of list value."""
    return baseline_of(pool_inputs(gpus=2000, list_value="10000000"), staff="100000", sga="1000000")


def _brute_force(baseline, goal, levers, demand=UNLIMITED):
    best = None
    for size in range(len(levers) + 1):
        for subset in itertools.combinations(levers, size):
            projection = project(baseline=baseline, levers=subset, demand=demand)
            if not goal_check(goal=goal, tfom=projection.tfom, start=APRIL, end=MAY).is_met:
                continue
            key = (
                sum(lever.cost for lever in subset),
                size,
                sorted(lever.slug for lever in subset),
            )
            if best is None or key < best:
                best = key
    return best


@pytest.mark.parametrize(
    ("gain", "demand"),
    [("1.05", UNLIMITED), ("1.2", UNLIMITED), ("1.4", UNLIMITED), ("1.6", UNLIMITED),
     ("1.05", MEASURED), ("1.2", MEASURED)],
)  # fmt: skip
def test_cheapest_lever_set_is_the_cheapest_of_every_subset(gain, demand):
    baseline = _big_baseline()
    measured = per_month(measured_tfom(baseline).ebitda, start=APRIL, end=MAY)
    goal = GoalSpec(min_ebitda_per_month=measured * D(gain))

    proposal = cheapest_lever_set(baseline=baseline, goal=goal, levers=CATALOGUE, demand=demand)

    best = _brute_force(baseline, goal, CATALOGUE, demand)
    assert best is not None
    assert (proposal.cost, len(proposal.levers), sorted(proposal.levers)) == best
    assert proposal.is_found and proposal.is_exhaustive
    assert goal_check(goal=goal, tfom=proposal.projection.tfom, start=APRIL, end=MAY).is_met


def test_cheapest_lever_set_says_when_no_set_meets_the_goal():
    baseline = _big_baseline()

    proposal = cheapest_lever_set(
        baseline=baseline, goal=GoalSpec(min_tfi=D("0.9")), levers=CATALOGUE, demand=UNLIMITED
    )

    assert not proposal.is_found and proposal.levers == ()
    assert proposal.subsets_checked == 2 ** len(CATALOGUE)
    assert "no set of the available levers meets the goal" in proposal.message
    assert _brute_force(baseline, GoalSpec(min_tfi=D("0.9")), CATALOGUE) is None


def test_cheapest_lever_set_is_empty_when_the_period_already_meets_the_goal():
    proposal = cheapest_lever_set(
        baseline=baseline_of(), goal=GoalSpec(min_tfi=D("0.1")), levers=CATALOGUE
    )

    assert proposal.is_found and proposal.levers == () and proposal.cost == 0


def test_cheapest_lever_set_stops_at_its_limit():
    proposal = cheapest_lever_set(
        baseline=_big_baseline(), goal=GoalSpec(min_tfi=D("0.9")), levers=CATALOGUE, limit=50
    )

    assert not proposal.is_found and not proposal.is_exhaustive
    assert proposal.subsets_checked == 50


def test_multiplier_blend_is_a_running_mean_with_the_prior_as_one_observation():
    # First measurement: (1.3 + 1.2) / 2; then the mean of 1.3, 1.2 and 1.1.
    first = multiplier_blend(prior=D("1.3"), realized=D("1.2"), observations=0)
    second = multiplier_blend(prior=first, realized=D("1.1"), observations=1)

    assert first == D("1.25")
    assert second == D("1.2")


def test_realized_split_gives_a_single_lever_the_whole_ratio():
    assert realized_split(realized_ratio=D("1.1"), multipliers={"a": D("1.3")}) == {"a": D("1.1")}


def test_realized_split_shares_by_projected_log_uplift():
    split = realized_split(realized_ratio=D("1.21"), multipliers={"a": D("1.1"), "b": D("1.21")})

    # ln 1.21 = 2 ln 1.1: a gets a third of the realized log-uplift, b two thirds.
    assert _close(split["a"] ** 3, Fraction("1.21"), Fraction(1, 10**20))
    assert _close(split["a"] * split["b"], Fraction("1.21"), Fraction(1, 10**20))
