"""Diagnosis (kpis.md section 6, step 2): the pure ranking, and constructed factories whose
only weak factor is named first with its evidence from the data.

The constructed factory: one pool of 10 GPUs (R_ref 1,000 tokens/s, SLO TTFT 2 s, TPOT
100 ms) over 2 March 2026, one capacity sample for the day, output tokens only at 2.00 per
million, sold to a paid tenant (acme) and, when asked, a trial tenant. Every factor is at or
above its target (α 1, β 0.8, η 0.9, σ 1, s 1, ρ 1) except the one a test weakens.
"""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.services.pricing import contract_create, price_create
from billing.services.rating import rated_usage_update
from flywheel.domain.loop.baseline import measured_tfom
from flywheel.domain.loop.demand import UNLIMITED
from flywheel.domain.loop.diagnosis import DEFAULT_TARGETS, diagnose
from flywheel.domain.loop.factors import FACTORS
from flywheel.domain.loop.projection import project
from flywheel.selectors.loop.diagnosis import diagnosis_get
from flywheel.services.tfom import factory_costs_create
from metering.models import CapacitySample, Deployment, ServedModel
from metering.services.sla.incidents import incident_create
from metering.services.usage.rollup import rollup_days
from portal.models import Tenant
from tests.flywheel.factories import make_cost_model
from tests.flywheel.test_loop_scenarios import baseline_of, pool_inputs
from tests.metering.factories import make_deployment, make_hourly_usage

JAN = datetime(2026, 1, 1, tzinfo=UTC)
DAY = datetime(2026, 3, 2, tzinfo=UTC)
END = DAY + timedelta(days=1)
D = Decimal
GOOD = {
    "healthy": 10,
    "busy": 8,
    "efficiency": "0.9",
    "compliant": "1",
    "trial": "0",
    "discount": "0",
}
WEAK = {
    "availability": {"healthy": 8, "busy": 7},
    "occupancy": {"busy": 5},
    "efficiency": {"efficiency": "0.6"},
    "sla_delivery": {"compliant": "0.9"},
    "sell_through": {"trial": "0.4"},
    "price_realization": {"discount": "30"},
}


def _usage(tenant, deployment, hour, output: int, compliant: Decimal, requests: int):
    """An hourly rollup row, and the daily row that sums it (as the rollup job keeps them)."""
    ok_output = int(output * compliant)
    row = make_hourly_usage(
        tenant,
        deployment,
        hour,
        requests=requests,
        output_tokens=output,
        ok_output_tokens=output,
        compliant_requests=int(requests * compliant),
        compliant_output_tokens=ok_output,
    )
    rollup_days({(tenant.pk, deployment.pk, hour.date())})
    return row


def build_factory(*, start=DAY, days=1, **overrides):
    """The constructed factory above over [start, start + days) (deployment, prices,
    contracts and costs made once); returns the deployment."""
    spec = {**GOOD, **overrides}
    deployment = Deployment.objects.filter(slug="llama@p1").first() or make_deployment(
        model="llama", pool="p1", gpus=10, r_ref="1000", ttft=2000, tpot=100
    )
    pool = deployment.pool
    if not ServedModel.objects.get(slug="llama").prices.exists():
        price_create(
            model=ServedModel.objects.get(slug="llama"),
            token_class="output",
            per_million=D("2.00"),
            currency="USD",
            effective_from=JAN,
        )
        acme = Tenant.objects.create(slug="acme", name="Acme")
        trial = Tenant.objects.create(slug="trial-co", name="Trial Co")
        contract_create(
            tenant=acme,
            kind="paid",
            discount_pct=D(spec["discount"]),
            currency="USD",
            effective_from=JAN,
        )
        contract_create(tenant=trial, kind="trial", currency="USD", effective_from=JAN)
        make_cost_model(pool)
        factory_costs_create(
            staff_per_month=D(7300),
            sga_per_month=D(3650),
            effective_from=JAN,
        )
    CapacitySample.objects.create(
        pool=pool,
        time=start,
        interval_s=86_400 * days,
        gpus_installed=10,
        gpus_healthy=spec["healthy"],
        gpus_busy=spec["busy"],
    )
    output = int(spec["busy"] * 86_400 * days * D(spec["efficiency"]) * 1000)
    trial_output = int(output * D(spec["trial"]))
    compliant = D(spec["compliant"])
    acme, trial = Tenant.objects.get(slug="acme"), Tenant.objects.get(slug="trial-co")
    for tenant, tokens, requests in (
        (acme, output - trial_output, 1000),
        (trial, trial_output, 400),
    ):
        if tokens:
            _usage(tenant, deployment, start, tokens, compliant, requests)
    rated_usage_update()  # billing's job after the fold
    return deployment


def test_diagnose_ranks_by_monthly_ebitda_and_names_the_bottleneck():
    baseline = baseline_of()  # α 0.9, β 0.5, η 0.8, σ 0.95, s 0.7, ρ 0.7: all below target
    measured = measured_tfom(baseline)

    diagnosis = diagnose(baseline=baseline)

    gains = [f.ebitda_gain_per_month for f in diagnosis.factors]
    assert gains == sorted(gains, reverse=True) and all(g > 0 for g in gains)
    assert diagnosis.bottleneck is diagnosis.factors[0]
    occupancy = diagnosis.factor("occupancy")
    expected = project(
        baseline=baseline, targets={"occupancy": DEFAULT_TARGETS["occupancy"]}, demand=UNLIMITED
    )
    assert occupancy.ebitda_gain_per_month == expected.ebitda_gain_per_month
    assert occupancy.projected_tfi == expected.tfom.tfi
    assert occupancy.value == measured.occupancy and occupancy.target == D("0.75")


def test_diagnose_gives_nothing_to_a_factor_at_target_and_no_bottleneck_when_all_are():
    baseline = baseline_of(
        pool_inputs(alpha="1", beta="0.8", eta="0.9", sigma="1", sell="1", rho="1")
    )

    diagnosis = diagnose(baseline=baseline)

    assert [f.ebitda_gain_per_month for f in diagnosis.factors] == [0] * 6
    assert [f.factor for f in diagnosis.factors] == list(FACTORS)  # ties keep the chain order
    assert diagnosis.bottleneck is None
    assert all(f.is_at_target and f.projection is None for f in diagnosis.factors)


def test_diagnose_uses_overridden_targets():
    baseline = baseline_of()

    diagnosis = diagnose(baseline=baseline, targets={"occupancy": D("0.5")})

    assert diagnosis.factor("occupancy").ebitda_gain_per_month == 0
    assert diagnosis.factor("occupancy").target == D("0.5")


EVIDENCE = {
    # factor: (evidence key of the first row, expected)
    "availability": ("unhealthy_gpu_hours", D(48)),  # 2 GPUs x 24 h
    "occupancy": ("idle_gpu_hours", D(120)),  # 5 healthy GPUs idle x 24 h
    "efficiency": ("short_gpu_hours", D("76.8")),  # 8 x 24 busy GPU-h x (1 - 0.6)
    "sla_delivery": ("slo_misses", 100),  # 10% of acme's 1,000 requests
    "sell_through": ("trial", 248_832_000),  # 40% of 622,080,000 output tokens
    "price_realization": ("contract_discount", D("373.248")),  # 30% of 1,244.16
}


@pytest.mark.both_backends
@pytest.mark.parametrize("weak", FACTORS)
def test_diagnosis_names_the_only_weak_factor_first_with_its_evidence(db, weak):
    deployment = build_factory(**WEAK[weak])
    if weak == "sla_delivery":
        incident_create(
            title="Decode stalls",
            severity="sev3",
            impact="degraded",
            started_at=DAY + timedelta(hours=1),
            resolved_at=DAY + timedelta(hours=1, minutes=30),
            deployments=[deployment],
            by=None,
            now=END,
        )

    diagnosis = diagnosis_get(start=DAY, end=END)

    first = diagnosis.factors[0]
    assert first.factor == weak and diagnosis.bottleneck is first
    assert first.ebitda_gain_per_month > 0
    assert [f.ebitda_gain_per_month for f in diagnosis.factors[1:]] == [0] * 5
    key, expected = EVIDENCE[weak]
    row = first.evidence.rows[0]
    assert row[key] == expected, (weak, row)
    assert key in {c.key for c in first.evidence.columns}
    if weak in ("availability", "occupancy"):
        assert row["pool"] == "p1"
    elif weak in ("efficiency", "sla_delivery"):
        assert row["deployment"] == "llama@p1"
    else:
        assert row["tenant"] == ("trial-co" if weak == "sell_through" else "acme")
    if weak == "sla_delivery":
        assert row["incident_minutes"] == 30
        assert row["missed_std_gpu_hours"] == D("17.28")  # 10% of 8 x 24 x 0.9 std GPU-h


@pytest.mark.both_backends
def test_diagnosis_of_a_factory_at_every_target_has_no_bottleneck(db):
    build_factory()

    diagnosis = diagnosis_get(start=DAY, end=END)

    assert diagnosis.bottleneck is None
    assert {f.factor: f.value for f in diagnosis.factors} == {
        "availability": 1,
        "occupancy": D("0.8"),
        "efficiency": D("0.9"),
        "sla_delivery": 1,
        "sell_through": 1,
        "price_realization": 1,
    }
