"""TFOM through the API and the service: hand-computed figures (kpis.md sections 4-5, 7.3).

The April example: one pool of 10 GPUs through April 2026 (30 days, 2,592,000 s; months(P)
= 30 / (365/12) = 72/73), 9 healthy and 6 busy all month, R_ref 1,000, 9,331,200,000 output
tokens (η 0.6, TEF 0.36), sold to one paid tenant at 2.00 per million output tokens and
0.50 per million input tokens, 20% off.
"""

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction

import pytest
from rest_framework.test import APIClient

from billing.services.rating import rated_usage_update
from flywheel.models import CostModel
from flywheel.selectors.tfom import tfom_measure
from flywheel.services.tfom import cost_model_create, factory_costs_create
from metering.models import GpuHourly, Pool
from metering.services.usage.rollup import usage_fold
from portal.errors import FieldError
from tests.flywheel.factories import COST_MODEL_TERMS

pytestmark = pytest.mark.both_backends

APRIL = "2026-04-01T00:00:00Z"
MAY = "2026-05-01T00:00:00Z"
APRIL_START = datetime(2026, 4, 1, tzinfo=UTC)
MAY_START = datetime(2026, 5, 1, tzinfo=UTC)
EVENTS = 5
OUTPUT_PER_EVENT = 1_866_240_000  # x 5 = 9,331,200,000 output tokens = 9,331,200 std GPU-s
INPUT_PER_EVENT = 1_000_000
COST_MODEL = {
    **COST_MODEL_TERMS,
    "idle_power_ratio": "0.3",
    "network_storage_per_gpu_month": "46",
    "effective_from": "2026-01-01T00:00:00Z",
}


def _close(value, expected: Fraction, tolerance=Fraction(1, 10**9)) -> bool:
    return value is not None and abs(Fraction(str(value)) - expected) <= tolerance


def _ok(response, status=201):
    assert response.status_code == status, response.json()
    return response.json()


def build_factory(admin, ingest, *, pool="h100-a", gpus=10, cost_model=True):
    """Pool, model, deployment, tenant, prices, contract and cost models through the API."""
    _ok(
        admin.post(
            "/api/v1/pools",
            {"slug": pool, "name": "H100 hall", "gpu_type": "H100", "gpu_count": gpus},
        )
    )
    _ok(admin.post("/api/v1/models", {"slug": "llama", "name": "Llama"}))
    _ok(
        admin.post(
            "/api/v1/deployments",
            {"slug": f"llama@{pool}", "model": "llama", "pool": pool, "r_ref": "1000", "w_in": "0"},
        )
    )
    _ok(admin.post("/api/v1/tenants", {"slug": "acme", "name": "Acme"}))
    for token_class, per_million in (
        ("input", "0.50"),
        ("cached_input", "0.25"),
        ("output", "2.00"),
    ):
        _ok(
            admin.post(
                "/api/v1/prices",
                {
                    "model": "llama",
                    "token_class": token_class,
                    "per_million": per_million,
                    "currency": "USD",
                    "effective_from": "2026-01-01T00:00:00Z",
                },
            )
        )
    _ok(
        admin.post(
            "/api/v1/contracts",
            {
                "tenant": "acme",
                "kind": "paid",
                "discount_pct": "20",
                "free_tokens_per_month": 0,
                "effective_from": "2026-01-01T00:00:00Z",
            },
        )
    )
    if cost_model:
        _ok(admin.post("/api/v1/cost-models", {"pool": pool, **COST_MODEL}))
        _ok(
            admin.post(
                "/api/v1/factory-costs",
                {
                    "staff_per_month": "7300",
                    "sga_per_month": "3650",
                    "effective_from": "2026-01-01T00:00:00Z",
                },
            )
        )


def post_april_usage(ingest, *, pool="h100-a", projects=(None,) * EVENTS):
    sample = {
        "pool": pool,
        "time": APRIL,
        "gpus_installed": 10,
        "gpus_healthy": 9,
        "gpus_busy": 6,
    }
    _ok(ingest.post("/api/v1/capacity", [sample]), 200)
    events = [
        {
            "id": f"ev-{i}",
            "time": f"2026-04-{10 + i:02d}T12:00:00Z",
            "tenant": "acme",
            "model": "llama",
            "input_tokens": INPUT_PER_EVENT,
            "cached_tokens": 0,
            "output_tokens": OUTPUT_PER_EVENT,
            **({"project": projects[i]} if projects[i] else {}),
        }
        for i in range(EVENTS)
    ]
    assert _ok(ingest.post("/api/v1/usage/events", events), 200) == {
        "accepted": EVENTS,
        "duplicates": 0,
    }
    usage_fold()
    rated_usage_update()  # billing's job after the fold


@pytest.fixture
def april(users, token_client):
    """The April example loaded through the API; returns the investor's API client (a
    session: investors hold no tokens)."""
    admin = token_client(users["operator"], scopes=["admin", "read"])
    ingest = token_client(users["operator"], scopes=["ingest"])
    build_factory(admin, ingest)
    post_april_usage(ingest)
    client = APIClient()
    client.force_login(users["investor"])
    return client


def test_tfom_api_one_pool_one_month_every_figure(april):
    body = _ok(april.get(f"/api/v1/tfom?scope=factory&from={APRIL}&to={MAY}"), 200)

    # KPIs: C = 10 x 2,592,000; A = 9 x; B = 6 x; std = 9,331,200,000 / 1,000
    assert body["scope"] == "factory"
    assert (body["from"], body["to"]) == (APRIL, MAY)
    assert body["telemetry"] == "measured"
    assert body["calendar_gpu_seconds"] == 25_920_000
    assert body["available_gpu_seconds"] == 23_328_000
    assert body["busy_gpu_seconds"] == 15_552_000
    assert body["std_gpu_seconds"] == 9_331_200
    assert _close(body["availability"], Fraction(9, 10))
    assert _close(body["occupancy"], Fraction(2, 3))
    assert _close(body["efficiency"], Fraction(3, 5))
    assert _close(body["tef"], Fraction(9, 25))  # 0.36
    assert (body["sla_delivery"], body["sell_through"]) == (1, 1)
    assert _close(body["price_realization"], Fraction(4, 5))
    assert _close(body["tfi"], Fraction(288, 1000))
    assert body["output_tokens"] == body["paid_output_tokens"] == 9_331_200_000
    # list: 9,331.2 M output x 2.00 + 5 M input x 0.50 = 18,664.90; realized 80% of it
    assert body["list_value"] == "18664.90"
    assert body["realized_revenue"] == body["revenue"] == "14931.92"
    # energy: 1.2 kW x 1.25 x (15,552,000 + 0.3 x 7,776,000) / 3,600 = 7,452 kWh at 0.10
    assert _close(body["energy_kwh"], Fraction(7452))
    assert body["energy_cost"] == "745.20"
    assert body["depreciation"] == "7200.00"  # 10 x 43,800 / 60 x 72/73
    assert body["hosting"] == "1440.00"  # 10 x (100 + 46) x 72/73
    assert body["cogs"] == "9385.20"
    assert body["gross_profit"] == "5546.72"
    assert _close(body["gross_margin"], Fraction(554_672, 1_493_192))
    assert body["opex"] == "10800.00"  # (7,300 + 3,650) x 72/73
    assert body["total_cost"] == "20185.20"
    assert body["ebitda"] == "1946.72"  # 14,931.92 - 745.20 - 1,440 - 10,800
    assert body["ebit"] == "-5253.28"
    assert body["capex_invested"] == "438000.00"
    # annualized: x 365 / 30
    assert _close(body["roi"], Fraction(-525_328, 100) * Fraction(365, 30) / 438_000)
    assert _close(body["payback_years"], 438_000 / (Fraction(194_672, 100) * Fraction(365, 30)))
    assert _close(body["asset_turnover"], Fraction(1_493_192, 100) * Fraction(365, 30) / 438_000)
    assert body["cost_per_million_tokens"] == "2.1631944444"  # 20,185.20 / 9,331.2
    assert body["cost_per_million_paid_tokens"] == "2.1631944444"
    assert body["revenue_per_million_tokens"] == "1.6002143347"  # 14,931.92 / 9,331.2
    assert body["daily_token_value_per_gpu"] == "49.77"  # 14,931.92 / 10 GPUs / 30 days
    assert _close(body["tokens_per_kwh"], Fraction(9_331_200_000, 7452))
    # 10 GPUs x 0.36 / 0.30 = 12 equivalent; 2 x 43,800 avoided
    assert body["baseline_tef"] == 0.3
    assert _close(body["equivalent_gpus"], Fraction(12))
    assert body["avoided_capex"] == "87600.00"
    assert body["currency"] == "USD"
    assert body["rating_errors"] == {}


def test_tfom_api_pool_scope_of_the_only_pool_equals_the_factory(april):
    factory = _ok(april.get(f"/api/v1/tfom?from={APRIL}&to={MAY}"), 200)
    pool = _ok(april.get(f"/api/v1/tfom?scope=h100-a&from={APRIL}&to={MAY}"), 200)
    assert pool["scope"] == "h100-a"
    assert {k: v for k, v in pool.items() if k != "scope"} == {
        k: v for k, v in factory.items() if k != "scope"
    }


def test_tfom_api_worked_example_3_equivalent_gpus(users, token_client):
    # Given 1,000 B200 GPUs, no capacity samples, R_ref 1,000, one hour with 2,340,000,000
    # output tokens (TEF 0.65) and capex 400,000 per GPU
    admin = token_client(users["operator"], scopes=["admin", "read"])
    ingest = token_client(users["operator"], scopes=["ingest"])
    build_factory(admin, ingest, pool="b200-sh", gpus=1000, cost_model=False)
    _ok(
        admin.post(
            "/api/v1/cost-models", {"pool": "b200-sh", **COST_MODEL, "capex_per_gpu": "400000"}
        )
    )
    events = [
        {
            "id": f"b-{i}",
            "time": "2026-04-01T00:30:00Z",
            "tenant": "acme",
            "model": "llama",
            "input_tokens": 0,
            "output_tokens": 1_170_000_000,
        }
        for i in range(2)
    ]
    _ok(ingest.post("/api/v1/usage/events", events), 200)
    usage_fold()

    # When
    body = _ok(
        admin.get(
            "/api/v1/tfom?baseline_tef=0.30&from=2026-04-01T00:00:00Z&to=2026-04-01T01:00:00Z"
        ),
        200,
    )

    # Then
    assert body["telemetry"] == "assumed"
    assert _close(body["tef"], Fraction(65, 100))
    assert round(body["equivalent_gpus"], 2) == 2166.67
    assert _close(body["equivalent_gpus"], Fraction(6500, 3))
    assert body["avoided_capex"] == "466666666.67"  # (6500/3 - 1000) x 400,000, unrounded


def test_tfom_api_pool_without_cost_model_is_a_400_naming_the_pool(users, token_client):
    admin = token_client(users["operator"], scopes=["admin", "read"])
    ingest = token_client(users["operator"], scopes=["ingest"])
    build_factory(admin, ingest, cost_model=False)
    # Not yet in service (no capacity sample, no usage): nothing to cost, nothing missing.
    idle = admin.get(f"/api/v1/tfom?from={APRIL}&to={MAY}")
    assert (idle.status_code, idle.json()["empty_reason"]) == (200, "no_pool_in_service")
    post_april_usage(ingest)
    usage_fold()

    response = admin.get(f"/api/v1/tfom?from={APRIL}&to={MAY}")

    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["field"] == "cost_model"
    assert "h100-a" in error["message"]


def test_tfom_api_cost_model_from_after_the_period_start_does_not_apply(april, users):
    # A version taking effect mid-April does not apply to April: the one in force at its
    # start does (kpis.md section 5).
    cost_model_create(
        pool=Pool.objects.get(slug="h100-a"),
        **{
            **{k: Decimal(str(v)) for k, v in COST_MODEL.items() if k != "effective_from"},
            "depreciation_months": 60,
            "capex_per_gpu": Decimal(99_999),
        },
        effective_from=datetime(2026, 4, 15, tzinfo=UTC),
    )
    body = _ok(april.get(f"/api/v1/tfom?from={APRIL}&to={MAY}"), 200)
    assert body["depreciation"] == "7200.00"
    may = _ok(april.get("/api/v1/tfom?from=2026-05-01&to=2026-05-02"), 200)
    assert may["capex_invested"] == "999990.00"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("scope=nowhere", "scope"),
        ("baseline_tef=0", "baseline_tef"),
        ("baseline_tef=abc", "baseline_tef"),
        ("from=2026-05-01&to=2026-04-01", "to"),
    ],
)
def test_tfom_api_refuses_bad_queries_with_the_field(april, query, field):
    response = april.get(f"/api/v1/tfom?{query}")
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [field]


def test_tfom_api_tenant_members_may_not_read_it(users, token_client):
    response = token_client(users["tenant"]).get("/api/v1/tfom")
    assert response.status_code == 403


def test_tfom_measure_pools_add_up_to_the_factory(april, users, token_client):
    # Given a second pool with its own cost model, in service since January, idle all April
    second = Pool.objects.create(
        slug="h200-b",
        name="H200",
        gpu_type="H200",
        gpu_count=30,
        in_service_from=datetime(2026, 1, 1, tzinfo=UTC),
    )
    cost_model_create(
        pool=second,
        capex_per_gpu=Decimal(54_000),
        depreciation_months=48,
        power_kw_per_gpu=Decimal("1.275"),
        pue=Decimal("1.3"),
        electricity_price_per_kwh=Decimal("0.083"),
        hosting_per_gpu_month=Decimal("191.25"),
        effective_from=datetime(2026, 1, 1, tzinfo=UTC),
    )
    factory = tfom_measure(scope="factory", start=APRIL_START, end=MAY_START)
    pools = [
        tfom_measure(scope=slug, start=APRIL_START, end=MAY_START) for slug in ("h100-a", "h200-b")
    ]
    # Opex is allocated by calendar GPU-seconds (10 : 30), revenue stays where it was made.
    assert round(pools[0].opex, 2) == Decimal("2700.00")
    assert round(pools[1].opex, 2) == Decimal("8100.00")
    assert round(pools[1].revenue, 2) == Decimal("0.00")
    for key in ("revenue", "cogs", "opex", "ebitda", "ebit", "equivalent_gpus", "avoided_capex"):
        assert abs(sum(getattr(p, key) for p in pools) - getattr(factory, key)) < Decimal(
            "1e-20"
        ), key


def test_tfom_measure_uses_dcgm_energy_at_95_percent_coverage(april):
    pool = Pool.objects.get(slug="h100-a")
    cost = CostModel.objects.get(pool=pool)
    start, end = datetime(2026, 4, 10, 12, tzinfo=UTC), datetime(2026, 4, 10, 13, tzinfo=UTC)
    # Nameplate: 1.2 x 1.25 x (6 busy + 0.3 x 3 idle) GPU-h = 10.35 kWh
    assert tfom_measure(scope="h100-a", start=start, end=end).energy_kwh == Decimal("10.35")
    # 9 of 10 GPU-hours measured (90%): still the nameplate model
    for gpu in range(9):
        GpuHourly.objects.create(pool=pool, hour=start, gpu_key=f"gpu-{gpu}", energy_j=3_600_000)
    assert tfom_measure(scope="h100-a", start=start, end=end).energy_kwh == Decimal("10.35")
    # 10 of 10 (100%): 10 kWh of GPU energy x node factor 1.8 x PUE 1.25 = 22.5 kWh
    GpuHourly.objects.create(pool=pool, hour=start, gpu_key="gpu-9", energy_j=3_600_000)
    tfom = tfom_measure(scope="h100-a", start=start, end=end)
    assert tfom.energy_kwh == Decimal("22.5")
    assert tfom.energy_cost == Decimal("22.5") * cost.electricity_price_per_kwh


def test_tfom_measure_raises_for_a_pool_without_cost_model(db):
    Pool.objects.create(
        slug="bare", name="Bare", gpu_type="H100", gpu_count=8, in_service_from=APRIL_START
    )
    factory_costs_create(
        staff_per_month=Decimal(1), sga_per_month=Decimal(1), effective_from=APRIL_START
    )
    with pytest.raises(FieldError) as caught:
        tfom_measure(scope="factory", start=APRIL_START, end=MAY_START)
    assert caught.value.field == "cost_model"
    assert "bare" in caught.value.message


@pytest.mark.parametrize("value", ["0", "-0.3", "2", "1e309", "nan", "abc", "1e-300", "0.009"])
def test_baseline_tef_outside_zero_to_one_is_a_400_naming_it(users, token_client, value):
    response = token_client(users["finance"]).get(f"/api/v1/tfom?baseline_tef={value}")

    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["baseline_tef"]


def test_baseline_tef_on_the_investor_page_is_the_same_rule(users, session_client):
    investor = session_client(users["investor"])

    assert investor.get("/investor/?baseline_tef=2").status_code == 400
    assert investor.get("/investor/?baseline_tef=1e-300").status_code == 400
    assert investor.get("/investor/?baseline_tef=1").status_code == 200
    assert investor.get("/investor/?baseline_tef=0.01").status_code == 200


def test_a_pool_counts_capacity_and_costs_only_while_in_service(april):
    """kpis.md section 0: the April factory's pool entered service on 10 April 12:00 and was
    retired on 20 April 12:00: C, and with it depreciation and hosting, cover those ten days
    only, and the month's TFOM needs no cost model before then."""
    pool = Pool.objects.get(slug="h100-a")
    whole = tfom_measure(scope="h100-a", start=APRIL_START, end=MAY_START)
    pool.in_service_from = datetime(2026, 4, 10, 12, tzinfo=UTC)
    pool.retired_at = datetime(2026, 4, 20, 12, tzinfo=UTC)
    pool.save()

    ten_days = tfom_measure(scope="h100-a", start=APRIL_START, end=MAY_START)
    before = tfom_measure(
        scope="h100-a", start=APRIL_START, end=datetime(2026, 4, 10, 12, tzinfo=UTC)
    )

    assert ten_days.calendar_gpu_seconds == 10 * 86_400 * 10  # 10 GPUs x 10 days
    assert ten_days.depreciation == whole.depreciation / 3  # 10 of April's 30 days
    assert ten_days.hosting == whole.hosting / 3
    assert (before.calendar_gpu_seconds, before.depreciation, before.tef) == (0, 0, None)


def test_tfom_revenue_of_a_closed_month_is_the_ledgers_to_the_cent(april):
    """kpis.md, Tie-out: once April is invoiced (and so closed), TFOM's revenue for April is
    the ledger's revenue by accounting date, and the report says how far the unrounded
    rating was from it; the KPI keys stay the rating's."""
    from billing.models import Invoice
    from billing.selectors.ledger import ledger_revenue
    from billing.services.close import close_run

    before = tfom_measure(scope="factory", start=APRIL_START, end=MAY_START)
    close_run(month_start=APRIL_START)
    invoiced = sum(i.total for i in Invoice.objects.filter(period_start=APRIL_START))

    after = tfom_measure(scope="factory", start=APRIL_START, end=MAY_START)
    ledger = ledger_revenue(start=APRIL_START.date(), end=MAY_START.date())

    assert invoiced > 0 and ledger == invoiced  # no promotions or credits in April
    assert after.revenue == ledger == round(ledger, 2)
    assert after.revenue_rated == before.revenue  # the rating, unrounded
    assert after.revenue_tie_out == ledger - before.revenue
    assert abs(after.revenue_tie_out) < Decimal("0.01") * Invoice.objects.count() * 10
    assert after.realized_revenue == before.realized_revenue  # KPI keys: the rating


def test_annualized_figures_of_less_than_seven_days_are_withheld_on_pages(april, users, client):
    """ui.md: ROI, payback and asset turnover from under 7 days of data are not shown, the
    reason said; the API keeps the kpis.md figures (as documented)."""
    client.force_login(users["finance"])
    short = client.get("/investor/?from=2026-04-01&to=2026-04-03").content.decode()
    week = client.get("/investor/?from=2026-04-01&to=2026-04-08").content.decode()
    report = client.get("/reports/tfom/?from=2026-04-01&to=2026-04-03&format=csv").content
    api = april.get("/api/v1/tfom?from=2026-04-01&to=2026-04-03").json()

    assert 'id="roi-withheld"' in short and "48 h of data are too few to annualize" in short
    assert 'id="roi-withheld"' not in week
    rows = {row["key"]: row for row in csv.DictReader(io.StringIO(report.decode()))}
    assert rows["roi"]["value"] == "" and "too few to annualize" in rows["roi"]["note"]
    assert api["roi"] is not None  # the API's figure stands
