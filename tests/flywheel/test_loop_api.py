"""The flywheel API: diagnosis, scenarios, the lever catalogue, goals, lever applications
and cycles (on the constructed factory of test_diagnosis, weak at occupancy: 5 of 10 GPUs
busy over 2 March 2026)."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from flywheel.models import Cycle, Goal, Lever, LeverApplication
from flywheel.services.loop.versions import lever_create
from metering.models import CapacitySample, Deployment, HourlyUsage, Pool
from portal import clock
from tests.flywheel.test_loop_diagnosis import DAY, JAN, build_factory

D = Decimal
PERIOD = {"from": "2026-03-02", "to": "2026-03-03"}
LEVER = {
    "slug": "pooled",
    "name": "Pooled multi-model scheduling",
    "description": "AlpaServe (OSDI 2023): up to 10x the rate within SLO.",
    "effects": {"occupancy": {"low": "1.1", "typical": "1.2", "high": "1.36"}},
    "one_time_cost": "180000",
    "monthly_cost": "20000",
    "effective_from": "2026-01-01T00:00:00Z",
}


def _session(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.fixture
def factory(db):
    build_factory(busy=5)
    lever_create(**{**LEVER, "effective_from": JAN, "one_time_cost": D(180_000),
                    "monthly_cost": D(20_000)})  # fmt: skip


def test_diagnosis_ranks_the_factors_with_evidence(factory, users):
    api = _session(users["investor"])

    response = api.get("/api/v1/flywheel/diagnosis", PERIOD)

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["bottleneck"] == "occupancy"
    first = body["factors"][0]
    assert (first["rank"], first["factor"], first["value"], first["target"]) == (
        1,
        "occupancy",
        0.5,
        0.75,
    )
    assert D(first["ebitda_gain_per_month"]) > 0
    assert first["evidence"]["rows"][0]["idle_gpu_hours"] == 120.0
    assert [f["ebitda_gain_per_month"] for f in body["factors"][1:]] == ["0.00"] * 5
    assert body["measured"]["occupancy"] == 0.5


def test_an_investor_reads_the_flywheel_page_and_changes_nothing(factory, users):
    """architecture.md's roles: investors read the flywheel. The page shows them the diagnosis
    (occupancy the bottleneck, as the API says) without a form to change it, nor the
    simulator, which runs scenarios by POST (operators and finance); a POST is refused."""
    investor, finance = _session(users["investor"]), _session(users["finance"])

    page = investor.get("/flywheel/", PERIOD)
    shown = page.content.decode()

    assert page.status_code == 200
    assert '<div class="value" id="bottleneck">β occupancy</div>' in shown
    assert 'name="action"' not in shown and 'id="scenario-form"' not in shown  # no form
    assert 'id="scenario-form"' in finance.get("/flywheel/", PERIOD).content.decode()
    refused = investor.post("/flywheel/", {"action": "cycle"})
    assert refused.status_code == 403 and not Cycle.objects.exists()


def test_a_pool_without_a_cost_model_is_left_out_and_named_the_rest_computed(factory, users):
    """A new pool in service without a cost model: diagnosis, scenarios and the page
    compute the other pools, as before it came, and name it; a pool not in service in the
    period needs none."""
    api = _session(users["operator"])
    before = (
        api.get("/api/v1/flywheel/diagnosis", PERIOD).json(),
        api.post("/api/v1/flywheel/scenarios", PERIOD).json(),
    )
    new = Pool.objects.create(slug="b200", name="B200", gpu_type="B200", gpu_count=8,
                              in_service_from=DAY)  # fmt: skip
    CapacitySample.objects.create(pool=new, time=DAY, gpus_installed=8, gpus_healthy=8,
                                  gpus_busy=0)  # fmt: skip
    Pool.objects.create(slug="later", name="Later", gpu_type="B200", gpu_count=8,
                        in_service_from=DAY + timedelta(days=30))  # fmt: skip

    diagnosis = api.get("/api/v1/flywheel/diagnosis", PERIOD).json()
    scenario = api.post("/api/v1/flywheel/scenarios", PERIOD).json()
    page = api.get("/flywheel/", PERIOD)

    uncosted = {
        "pools": ["b200"],
        "message": "pool b200 has no cost model in force at 2026-03-02 00:00 UTC: add one "
        "(POST /api/v1/cost-models); until then every figure here covers the other pools only",
    }
    assert diagnosis["uncosted"] == scenario["uncosted"] == uncosted
    assert before[0]["uncosted"] is None and before[1]["uncosted"] is None
    assert diagnosis["measured"] == before[0]["measured"]
    assert diagnosis["bottleneck"] == "occupancy"
    assert scenario["figures"] == before[1]["figures"]
    assert page.status_code == 200
    assert "Pool b200 has no cost model" in page.content.decode()


def test_diagnosis_takes_targets_and_refuses_bad_ones(factory, users, token_client):
    api = token_client(users["operator"])

    lowered = api.get("/api/v1/flywheel/diagnosis", {**PERIOD, "targets": "occupancy:0.5"})
    refused = api.get("/api/v1/flywheel/diagnosis", {**PERIOD, "targets": "occupancy:1.5"})

    assert lowered.json()["bottleneck"] is None
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "targets"


def test_scenario_under_measured_demand_by_default_sells_nothing_more_for_occupancy(
    factory, users, token_client
):
    api = token_client(users["operator"])

    body = api.post(
        "/api/v1/flywheel/scenarios",
        {**PERIOD, "targets": {"occupancy": "0.6"}, "levers": ["pooled"]},
    ).json()

    assert body["demand"] == "measured" and "measured demand" in body["demand_label"]
    assert body["factors"]["occupancy"] == {"measured": 0.5, "projected": 0.5}
    assert body["projected"]["revenue_per_month"] == body["measured"]["revenue_per_month"]
    # The lever's 20,000 a month is all it changes.
    ebitda = D(body["projected"]["ebitda_per_month"]) - D(body["measured"]["ebitda_per_month"])
    assert abs(ebitda + 20_000) <= D("0.01")  # each figure rounded to the cent
    assert [p["pool"] for p in body["pools"]] == ["p1"]
    assert body["pools"][0]["released_gpus"] == 0 and body["series"] is None


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ({"demand": "forecast"}, "demand", "must be one of measured, growth, unlimited"),
        ({"demand": "growth"}, "growth_pct_per_month", "needs its % per month"),
        ({"demand": "growth", "growth_pct_per_month": "150"}, "growth_pct_per_month", "100"),
        ({"growth_pct_per_month": "5"}, "growth_pct_per_month", "growth only"),
    ],
)
def test_scenario_refuses_a_demand_it_does_not_know(factory, users, token_client, extra, field,
                                                    message):  # fmt: skip
    response = token_client(users["operator"]).post(
        "/api/v1/flywheel/scenarios", {**PERIOD, **extra}
    )

    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == field and message in error["message"]


def test_scenario_under_growth_carries_twelve_months(factory, users, token_client):
    body = (
        token_client(users["operator"])
        .post(
            "/api/v1/flywheel/scenarios",
            {**PERIOD, "demand": "growth", "growth_pct_per_month": "10"},
        )
        .json()
    )

    assert body["demand"] == "growth" and body["growth_pct_per_month"] == 10.0
    months = body["series"]["months"]
    assert [m["month"] for m in months] == list(range(1, 13))
    # β 0.5: twice the measured demand fits; 1.1^8 = 2.14 does not.
    assert body["series"]["first_month_over_capacity"] == 8
    assert months[6]["served_tokens"] == months[6]["demand_tokens"]
    assert months[7]["served_tokens"] < months[7]["demand_tokens"]
    assert body["projected"]["tfi"] == months[11]["tfi"]  # the goal's month: the 12th


def test_scenario_projects_targets_and_levers(factory, users, token_client):
    api = token_client(users["finance"])  # a read token may run scenarios

    response = api.post(
        "/api/v1/flywheel/scenarios",
        {**PERIOD, "targets": {"occupancy": "0.6"}, "levers": ["pooled"], "demand": "unlimited"},
    )

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["demand"] == "unlimited" and "growth_pct_per_month" not in body
    assert body["factors"]["occupancy"] == {"measured": 0.5, "projected": pytest.approx(0.72)}
    assert body["projected"]["tfi"] == pytest.approx(0.72 * 0.9)
    # Revenue scales with TFI (x1.44); the lever's 20,000 a month is opex.
    revenue = D(body["projected"]["revenue_per_month"]) / D(body["measured"]["revenue_per_month"])
    assert revenue == pytest.approx(D("1.44"))
    assert D(body["projected"]["opex_per_month"]) - D(body["measured"]["opex_per_month"]) == 20_000
    assert body["lever_costs"] == {
        "one_time": "180000.00",
        "monthly": "20000.00",
        "total": "420000.00",
    }
    assert body["range"]["low"]["tfi"] == pytest.approx(0.6 * 1.1 * 0.9)
    assert body["range"]["high"]["tfi"] == pytest.approx(0.6 * 1.36 * 0.9)
    assert body["goal"] is None and body["proposal"] is None


def test_scenario_checks_a_goal_and_proposes_levers(factory, users):
    api = _session(users["operator"])

    goal = {"goal": {"min_tfi": "0.5"}}
    unlimited = api.post("/api/v1/flywheel/scenarios", {**PERIOD, **goal, "demand": "unlimited"})
    measured = api.post("/api/v1/flywheel/scenarios", {**PERIOD, **goal})

    body = unlimited.json()
    assert body["goal"]["is_met"] is False  # TFI 0.45
    assert body["proposal"]["is_found"] and body["proposal"]["levers"] == ["pooled"]
    assert body["proposal"]["cost"] == "420000.00" and body["proposal"]["demand"] == "unlimited"
    # Under the measured demand a busier GPU sells nothing more: no set meets it.
    assert measured.json()["proposal"]["demand"] == "measured"
    assert not measured.json()["proposal"]["is_found"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"targets": {"occupancy": "1.2"}}, "targets"),
        ({"targets": {"speed": "0.5"}}, "targets"),
        ({"levers": ["unknown"]}, "levers"),
        ({"estimate": "optimistic"}, "estimate"),
        ({"baseline": "bogus"}, "baseline"),  # not a key the page was given
        ({"baseline": "x" * 23}, "baseline"),
    ],
)
def test_scenario_refuses_invalid_input(factory, users, payload, field):
    response = _session(users["operator"]).post("/api/v1/flywheel/scenarios", {**PERIOD, **payload})

    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field


def test_scenario_is_for_operators_and_finance(factory, users):
    for role, status in (("investor", 403), ("tenant", 403), ("finance", 200)):
        response = _session(users[role]).post("/api/v1/flywheel/scenarios", PERIOD)
        assert response.status_code == status, role


def test_levers_are_created_as_versions_and_never_edited(db, users, token_client):
    admin = token_client(users["operator"], scopes=["admin", "read"])

    created = admin.post("/api/v1/levers", LEVER)
    again = admin.post("/api/v1/levers", LEVER)
    later = admin.post(
        "/api/v1/levers",
        {**LEVER, "effective_from": "2026-02-01T00:00:00Z", "monthly_cost": "25000"},
    )

    assert created.status_code == 201, created.json()
    assert created.json()["effects"] == {
        "occupancy": {"low": "1.1", "typical": "1.2", "high": "1.36"}
    }
    assert created.json()["source"] == "operator"
    assert again.status_code == 400 and again.json()["errors"][0]["field"] == "effective_from"
    assert later.status_code == 201
    listing = admin.get("/api/v1/levers", {"slug": "pooled"}).json()
    assert [r["monthly_cost"] for r in listing["results"]] == ["20000.0000", "25000.0000"]
    in_force = admin.delete(f"/api/v1/levers/{created.json()['id']}")
    assert in_force.status_code == 400 and Lever.objects.count() == 2
    assert admin.patch(f"/api/v1/levers/{created.json()['id']}", {"name": "x"}).status_code == 405


@pytest.mark.parametrize(
    ("effects", "field"),
    [
        ({"occupancy": {"low": "1.3", "typical": "1.2", "high": "1.4"}}, "effects.occupancy"),
        ({"speed": {"low": "1", "typical": "1", "high": "1"}}, "effects.speed"),
        ({}, "effects"),
    ],
)
def test_lever_effects_are_checked(db, users, token_client, effects, field):
    admin = token_client(users["operator"], scopes=["admin"])

    response = admin.post("/api/v1/levers", {**LEVER, "effects": effects})

    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field
    assert not Lever.objects.exists()


@pytest.mark.parametrize(
    ("effects", "field"),
    [
        ({"occupancy": {"low": "1e-300", "typical": "1", "high": "1"}}, "effects.occupancy.low"),
        ({"occupancy": {"low": "1", "typical": "1", "high": "1e300"}}, "effects.occupancy.high"),
        ({"occupancy": {"low": "1.0000001", "typical": "2", "high": "2"}}, "effects.occupancy.low"),
        ({"occupancy": {"low": [1], "typical": "2", "high": "2"}}, "effects.occupancy.low"),
        ({"occupancy": {"low": True, "typical": "2", "high": "2"}}, "effects.occupancy.low"),
        ({"occupancy": "1.2"}, "effects.occupancy"),
        (["occupancy"], "effects"),
    ],
)
def test_lever_multipliers_that_would_underflow_or_overflow_are_refused(
    db, users, token_client, effects, field
):
    admin = token_client(users["operator"], scopes=["admin"])

    response = admin.post("/api/v1/levers", {**LEVER, "effects": effects}, format="json")

    assert response.status_code == 400, response.json()
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert not Lever.objects.exists()


@pytest.mark.parametrize(
    ("targets", "field"),
    [
        ("0.8", "factor_targets"),
        (0.8, "factor_targets"),
        (["occupancy"], "factor_targets"),
        ({"occupancy": "1e-300"}, "factor_targets.occupancy"),
        ({"efficiency": "1e300"}, "factor_targets.efficiency"),
        ({"occupancy": {"value": "0.8"}}, "factor_targets.occupancy"),
    ],
)
def test_goal_factor_targets_are_checked_by_type_and_range(db, users, targets, field):
    api = _session(users["operator"])
    body = {"min_tfi": "0.3", "factor_targets": targets, "effective_from": "2026-12-01T00:00:00Z"}

    response = api.post("/api/v1/goals", body, format="json")

    assert response.status_code == 400, response.json()
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert not Goal.objects.exists()


def test_only_operators_write_levers_and_goals(db, users):
    for url, payload in (("/api/v1/levers", LEVER), ("/api/v1/goals", {"min_tfi": "0.3"})):
        for role in ("finance", "investor"):
            response = _session(users[role]).post(url, payload)
            assert response.status_code == 403, (url, role)
    assert not Lever.objects.exists() and not Goal.objects.exists()


def test_goals_need_a_criterion_and_a_future_one_may_be_withdrawn(db, users):
    api = _session(users["operator"])
    future = (clock.now() + timedelta(days=2)).replace(minute=0, second=0, microsecond=0)

    empty = api.post("/api/v1/goals", {"effective_from": "2026-01-01T00:00:00Z"})
    goal = api.post(
        "/api/v1/goals",
        {
            "min_gross_margin": "0.55",
            "factor_targets": {"occupancy": "0.8"},
            "effective_from": future.isoformat(),
        },
    )

    assert empty.status_code == 400
    assert goal.status_code == 201, goal.json()
    assert goal.json()["factor_targets"] == {"occupancy": "0.8"}
    assert api.delete(f"/api/v1/goals/{goal.json()['id']}").status_code == 204
    assert not Goal.objects.exists()


def test_lever_applications_record_the_baseline_and_withdraw_before_measured(db, users):
    build_factory(start=DAY - timedelta(days=6), days=7, busy=5)  # the week before 3 March
    lever_create(**{**LEVER, "effective_from": JAN, "one_time_cost": D(180_000),
                    "monthly_cost": D(20_000)})  # fmt: skip
    api = _session(users["operator"])

    response = api.post(
        "/api/v1/lever-applications",
        {"lever": "pooled", "applied_at": "2026-03-03T00:00:00Z", "note": "rolled out"},
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["baseline_factors"]["occupancy"] == "0.5"
    assert body["projected"] == {"occupancy": "1.2"}
    assert body["evaluated_by"] is None
    again = api.post(
        "/api/v1/lever-applications", {"lever": "pooled", "applied_at": "2026-03-03T00:00:00Z"}
    )
    assert again.status_code == 400
    assert api.delete(f"/api/v1/lever-applications/{body['id']}").status_code == 204
    assert not LeverApplication.objects.exists()


def test_cycles_run_on_request_and_list(factory, users):
    api = _session(users["operator"])

    queued = api.post("/api/v1/flywheel/cycles", PERIOD)
    refused = _session(users["finance"]).post("/api/v1/flywheel/cycles", PERIOD)

    assert queued.status_code == 202, queued.json()  # the cycle job ran it (eager here)
    assert queued.json() == {
        "from": "2026-03-02T00:00:00Z",
        "to": "2026-03-03T00:00:00Z",
        "url": "/api/v1/flywheel/cycles?from=2026-03-02T00%3A00%3A00Z&to=2026-03-03T00%3A00%3A00Z",
    }
    [created] = api.get(queued.json()["url"]).json()["results"]
    assert created["bottleneck"] == "occupancy"
    assert created["diagnosis"][0]["evidence"]["rows"][0]["idle_gpu_hours"] == 120.0
    assert refused.status_code == 403
    reader = _session(users["investor"])
    with CaptureQueriesContext(connection) as one:
        assert reader.get("/api/v1/flywheel/cycles").json()["count"] == 1
    for day in (3, 4):
        api.post(
            "/api/v1/flywheel/cycles", {"from": f"2026-03-0{day}", "to": f"2026-03-0{day + 1}"}
        )
    with CaptureQueriesContext(connection) as three:
        assert reader.get("/api/v1/flywheel/cycles").json()["count"] == 3
    assert len(three) == len(one)  # the queries do not grow with the cycles listed


def test_a_lever_acts_in_a_pool_or_a_deployment_and_may_withdraw_its_gpus(
    factory, users, token_client
):
    admin = token_client(users["operator"], scopes=["admin", "read"])
    kernels = {**LEVER, "slug": "kernels", "effects": {
        "efficiency": {"low": "1.25", "typical": "1.25", "high": "1.25"}}}  # fmt: skip
    release = {**LEVER, "slug": "release", "effects": {}, "one_time_cost": "1000",
               "monthly_cost": "0"}  # fmt: skip

    scoped = admin.post("/api/v1/levers", {**kernels, "deployment": "llama@p1"})
    withdrawing = admin.post("/api/v1/levers", {**release, "pool": "p1", "gpus_withdrawn": 4})
    both = admin.post("/api/v1/levers", {**kernels, "slug": "x", "pool": "p1",
                                         "deployment": "llama@p1"})  # fmt: skip
    nowhere = admin.post("/api/v1/levers", {**release, "slug": "y", "gpus_withdrawn": 4})
    too_many = admin.post("/api/v1/levers", {**release, "slug": "z", "pool": "p1",
                                             "gpus_withdrawn": 11})  # fmt: skip
    nothing = admin.post("/api/v1/levers", {**release, "slug": "w", "pool": "p1"})

    assert scoped.status_code == 201, scoped.json()
    assert (scoped.json()["deployment"], scoped.json()["pool"]) == ("llama@p1", None)
    assert withdrawing.status_code == 201 and withdrawing.json()["gpus_withdrawn"] == 4
    for response, field, message in (
        (both, "deployment", "not both"),
        (nowhere, "gpus_withdrawn", "name the pool"),
        (too_many, "gpus_withdrawn", "p1 has 10 GPUs installed"),
        (nothing, "effects", "name at least one factor"),
    ):
        assert response.status_code == 400
        error = response.json()["errors"][0]
        assert error["field"] == field and message in error["message"], error

    # llama@p1 makes all of p1's production: the lever reaches all of it. Under the measured
    # demand η × 1.25 needs 1 / 1.25 of the busy time: 2 of p1's 10 GPUs are released.
    faster = admin.post("/api/v1/flywheel/scenarios", {**PERIOD, "levers": ["kernels"]}).json()
    (pool,) = faster["pools"]
    assert (pool["installed_gpus"], pool["released_gpus"]) == (10.0, pytest.approx(2.0))
    assert faster["projected"]["revenue_per_month"] == faster["measured"]["revenue_per_month"]
    # Withdrawing 4 of them: 6 installed, the demand (5 busy) still served.
    fewer = admin.post("/api/v1/flywheel/scenarios", {**PERIOD, "levers": ["release"]}).json()
    (pool,) = fewer["pools"]
    assert (pool["projected_installed_gpus"], pool["withdrawn_gpus"]) == (6.0, 4)
    assert pool["projected_busy_gpus"] == pytest.approx(5.0)
    assert fewer["projected"]["revenue_per_month"] == fewer["measured"]["revenue_per_month"]
    assert D(fewer["figures"]["depreciation"]) < D(faster["figures"]["depreciation"])


def test_a_calendar_months_flywheel_figures_are_the_tfom_reports(factory, users):
    """Per month over March is March's own figure, as GET /api/v1/tfom gives it; a week's
    is labelled per 30.4-day month."""
    api = _session(users["finance"])
    march = {"from": "2026-03-01", "to": "2026-04-01"}

    tfom = api.get("/api/v1/tfom", march).json()
    diagnosis = api.get("/api/v1/flywheel/diagnosis", march).json()
    scenario = api.post("/api/v1/flywheel/scenarios", march).json()
    week = api.post("/api/v1/flywheel/scenarios", {"from": "2026-03-01", "to": "2026-03-08"})

    assert diagnosis["ebitda_per_month"] == tfom["ebitda"]
    assert scenario["measured"]["ebitda_per_month"] == tfom["ebitda"]
    assert scenario["measured"]["revenue_per_month"] == tfom["revenue"]
    assert scenario["month_basis"] == diagnosis["month_basis"] == "calendar month"
    assert week.json()["month_basis"] == "30.4-day month"


def test_a_deployments_share_of_its_pool_is_its_part_of_the_pools_production(factory):
    """llama@p1 made 5 busy GPUs × 0.9 of a day's production (w_in 0, R_ref 1000 for
    both); mistral@p1 a third of that again in one hour: a quarter of p1's."""
    from flywheel.selectors.production import deployment_shares
    from portal.models import Tenant
    from tests.metering.factories import make_deployment, make_hourly_usage

    llama = Deployment.objects.get(slug="llama@p1")
    llama_output = sum(HourlyUsage.objects.filter(deployment=llama).values_list(
        "output_tokens", flat=True))  # fmt: skip
    mistral = make_deployment(model="mistral", pool="p1", r_ref="1000")
    make_hourly_usage(Tenant.objects.get(slug="acme"), mistral,
                      datetime(2026, 3, 2, 5, tzinfo=UTC), output_tokens=llama_output // 3,
                      requests=10)  # fmt: skip

    shares = deployment_shares(
        start=datetime(2026, 3, 2, tzinfo=UTC),
        end=datetime(2026, 3, 3, tzinfo=UTC),
        deployment_ids=[llama.pk, mistral.pk],
    )

    assert shares[llama.pk] == D(llama_output) / (llama_output + llama_output // 3)
    assert shares[mistral.pk] == D(llama_output // 3) / (llama_output + llama_output // 3)
    assert shares[llama.pk] + shares[mistral.pk] == 1
