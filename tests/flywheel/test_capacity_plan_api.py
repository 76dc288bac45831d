"""The capacity plan through its API (kpis.md 6c): the worked example through the what-if,
the forecast job's stored plan and the plan as it stood at a month's start against what was
measured."""

from datetime import UTC, date, datetime, timedelta

import pytest

from flywheel.models import CapacityPlan, Forecast, KpiSnapshot
from flywheel.services.plan import capacity_plan_update
from metering.models import Pool
from tests.flywheel.factories import make_cost_model
from tests.metering.factories import make_deployment

WHAT_IF = "/api/v1/capacity-plan/what-if"


def _point(gpu_type, concurrency, per_gpu, per_user):
    return {
        "model": "m", "gpu_type": gpu_type, "tp": 1, "precision": "fp8",
        "concurrency": concurrency, "tok_s_per_gpu": per_gpu, "tok_s_per_user": per_user,
        "token_basis": "output", "isl": 1000, "osl": 250,
    }  # fmt: skip


@pytest.fixture
def example(db, admin_api):
    """kpis.md 6c's worked example: model m with a TPOT SLO of 20 ms (50 tok/s per user);
    curves giving R_ref 2,500 on H100 and 4,000 on H200 there; cost models giving 2.50 and
    3.50 per GPU-hour (capex 21,900 and 30,660 over 12 months of 730 h, nothing else)."""
    make_deployment(model="m", pool="h100-a", gpus=100, tpot=20)
    Pool.objects.create(slug="h200-a", name="h200-a", gpu_type="H200", gpu_count=100)
    for slug, capex in (("h100-a", "21900"), ("h200-a", "30660")):
        make_cost_model(
            Pool.objects.get(slug=slug), capex_per_gpu=capex, depreciation_months=12,
            power_kw_per_gpu="0", hosting_per_gpu_month="0",
        )  # fmt: skip
    points = [
        _point("H100", 8, 3000, 20), _point("H100", 2, 2500, 50),
        _point("H200", 8, 5000, 20), _point("H200", 2, 4000, 50),
    ]  # fmt: skip
    assert admin_api.post("/api/v1/reference-curves", points, format="json").status_code == 201


def test_the_worked_example_through_the_what_if_api(example, users, session_client):
    client = session_client(users["finance"])
    answer = client.post(WHAT_IF, {"demand": {"m": 10000}}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["placement"] == [
        {"model": "m", "pool": "h100-a", "gpus": 2},
        {"model": "m", "pool": "h200-a", "gpus": 2},
    ]
    assert (body["cost_per_hour"], body["cost_per_month"], body["can_serve"]) == (
        "12.00", "8760.00", True,
    )  # fmt: skip
    assert [p["cost_per_gpu_hour"] for p in body["pools"]] == ["2.50", "3.50"]
    assert body["demand"][0]["capacity_tok_s"] == "10400"

    Pool.objects.filter(slug="h100-a").update(gpu_count=1)
    Pool.objects.filter(slug="h200-a").update(gpu_count=2)
    capped = client.post(WHAT_IF, {"demand": {"m": 10000}}, content_type="application/json")
    body = capped.json()
    assert body["can_serve"] is False
    assert body["demand"] == [
        {"model": "m", "peak_tok_s": "10000", "capacity_tok_s": "8400",
         "unserved_tok_s": "1600"},
    ]  # fmt: skip
    bought = client.post(
        WHAT_IF, {"demand": {"m": 10000}, "allow_purchase": True}, content_type="application/json"
    ).json()
    assert [(p["pool"], p["add"], p["capex_added"]) for p in bought["pools"]] == [
        ("h100-a", 1, "21900.00"), ("h200-a", 0, "0.00"),
    ]  # fmt: skip


def test_the_what_if_refuses_naming_the_field_and_investors(example, users, session_client):
    client = session_client(users["operator"])
    unknown = client.post(WHAT_IF, {"demand": {"x": 1}}, content_type="application/json")
    assert unknown.json()["errors"] == [{"field": "demand.x", "message": "unknown model 'x'"}]
    busy = client.post(
        WHAT_IF, {"demand": {"m": 1}, "target_busy": 2}, content_type="application/json"
    )
    assert busy.json()["errors"][0]["field"] == "target_busy"
    investor = session_client(users["investor"]).post(
        WHAT_IF, {"demand": {"m": 1}}, content_type="application/json"
    )
    assert investor.status_code == 403


def _forecast(scope, metric, *, start, history, forecast_start, points):
    return Forecast.objects.create(
        scope=scope, metric=metric, method="ets", history_start=start, history=history,
        forecast_start=forecast_start, points=points, made_at=datetime(2026, 12, 1, tzinfo=UTC),
    )  # fmt: skip


def test_the_job_stores_the_plan_and_keeps_the_one_made_at_the_month_start(
    example, users, session_client, now
):
    # Model m: 864,000,000 tokens a day forecast (10,000 tok/s), its p80 the same; closed
    # days of November at 432,000,000 tokens and 864 of revenue each (2 per million).
    nov = date(2026, 11, 1)
    for scope in ("model:m", "factory"):
        _forecast(scope, "tokens", start=nov, history=[432e6] * 30, forecast_start=date(2026, 12, 1),
                  points=[[864e6, 800e6, 864e6, 700e6, 900e6]] * 90)  # fmt: skip
        _forecast(scope, "revenue", start=nov, history=[864.0] * 30,
                  forecast_start=date(2026, 12, 1), points=[[0, 0, 0, 0, 0]] * 90)  # fmt: skip
    start = capacity_plan_update(now=datetime(2026, 12, 1, 8, tzinfo=UTC))
    december = start.body["months"][0]
    assert december["month"] == "2026-12"
    # 10,000 tok/s x peak ratio 1 (no 5-minute traffic): 2 H100 + 2 H200, as the example.
    assert december["placement"] == [
        {"model": "m", "pool": "h100-a", "gpus": 2}, {"model": "m", "pool": "h200-a", "gpus": 2},
    ]  # fmt: skip
    assert december["tokens"] == 31 * 864_000_000
    assert december["revenue"] == "53568.00"  # 26.784e9 tokens x 2 per million
    later = capacity_plan_update(now=now)  # the 16th: the latest plan moves, December's stays
    assert CapacityPlan.objects.get(key="2026-12").made_at == datetime(2026, 12, 1, 8, tzinfo=UTC)
    assert later.made_at == now
    api = session_client(users["investor"]).get("/api/v1/capacity-plan")
    assert api.status_code == 200 and len(api.json()["months"]) == 12
    csv = session_client(users["investor"]).get("/api/v1/capacity-plan?format=csv")
    assert csv.content.decode().splitlines()[1].startswith("2026-12,h100-a,H100,100,2,0,98,")
    assert session_client(users["tenant"]).get("/api/v1/capacity-plan").status_code == 403
    page = session_client(users["investor"]).get("/capacity-plan/").content.decode()
    assert 'data-month="2026-12" data-pool="h200-a"' in page
    assert "linear: 2,500 tok/s per GPU" in page  # the H100 curve's operating point, read
    assert 'id="curve-chart-1"' in page and 'id="gpus-chart"' in page


def test_a_month_that_ended_shows_its_start_plan_beside_what_was_measured(
    example, users, session_client
):
    nov = date(2026, 11, 1)
    _forecast("factory", "tokens", start=nov, history=[400e6] * 45,
              forecast_start=nov + timedelta(days=45), points=[])  # fmt: skip
    _forecast("factory", "revenue", start=nov, history=[800.0] * 45,
              forecast_start=nov + timedelta(days=45), points=[])  # fmt: skip
    planned = {"month": "2026-11", "tokens": 12_960_000_000, "busy_gpus": "5.0",
               "revenue": "25920.00", "ebitda": "1000.00"}  # fmt: skip
    CapacityPlan.objects.create(
        key="2026-11", made_at=datetime(2026, 11, 1, 6, tzinfo=UTC), body={"months": [planned]}
    )
    KpiSnapshot.objects.create(
        scope="factory", period_kind="month", period_start=datetime(2026, 11, 1, tzinfo=UTC),
        period_end=datetime(2026, 12, 1, tzinfo=UTC), telemetry="full",
        values={"busy_gpu_seconds": 4 * 30 * 86400}, measured_at=datetime(2026, 12, 1, tzinfo=UTC),
    )  # fmt: skip
    plan = session_client(users["operator"]).get("/api/v1/capacity-plan").json()
    assert plan["plan_vs_actual"] == [
        {
            "month": "2026-11",
            "plan_made_at": "2026-11-01T06:00:00Z",
            "planned": {"tokens": 12_960_000_000, "busy_gpus": "5.0", "revenue": "25920.00",
                        "ebitda": "1000.00"},
            "actual": {"tokens": 12_000_000_000, "busy_gpus": "4.0", "revenue": "24000.00"},
        }
    ]  # fmt: skip


def test_with_no_lever_set_under_growth_the_goal_check_proposes_the_plans_gpus(db):
    from decimal import Decimal

    from flywheel.domain.loop.demand import Demand
    from flywheel.domain.loop.goals import Proposal
    from flywheel.selectors.loop.shapes import proposal_json

    pool = {"pool": "b200-a", "gpu_type": "B200", "add": 16, "order_by": "2026-10-01",
            "capex_added": "990400.00"}  # fmt: skip
    CapacityPlan.objects.create(
        key=CapacityPlan.LATEST, made_at=datetime(2026, 12, 16, tzinfo=UTC),
        body={"currency": "USD", "months": [{"month": "2027-01", "pools": [pool]}]},
    )  # fmt: skip
    none = Proposal(is_found=False, levers=(), cost=Decimal(0), projection=None,
                    subsets_checked=8, is_exhaustive=True, message="no lever set meets it",
                    demand=Demand(kind="growth", growth_pct_per_month=Decimal(10)))  # fmt: skip
    shown = proposal_json(none)
    assert [c["message"] for c in shown["capacity"]] == [
        "add 16 B200 GPUs to b200-a by 2027-01 (order by 2026-10-01): capex 990400.00 USD, "
        "from the capacity plan"
    ]
    assert shown["message"].startswith("no lever set meets it; add 16 B200 GPUs")
    measured = proposal_json(Proposal(**{**none.__dict__, "demand": Demand()}))
    assert measured["capacity"] == []


def test_the_peak_ratio_is_the_p95_over_the_mean_of_5_minute_tok_s_not_of_requests(tenant_a, now):
    """kpis.md 6c: p95 ÷ mean of the model's 5-minute tok/s. Ten buckets of 10 requests that
    all failed (no tokens made), then ten of one request making 3,000 output and 2,000 input
    tokens (w_in 0.5: 4,000 tok): tok/s p95 4,000, mean 2,000, ratio 2, where the request
    rates (10 ten times, 1 ten times: p95 10, mean 5.5) gave 1.818."""
    from flywheel.selectors.plan import closed_until, plan_inputs
    from metering.models import FiveMinuteUsage

    deployment = make_deployment(model="m", w_in="0.5")
    _forecast("model:m", "tokens", start=date(2026, 11, 1), history=[1e9] * 30,
              forecast_start=date(2026, 12, 1), points=[[1e9] * 5] * 90)  # fmt: skip
    finish = datetime.combine(closed_until(now=now), datetime.min.time(), tzinfo=UTC)
    for i in range(20):
        failed = i < 10
        FiveMinuteUsage.objects.create(
            tenant=tenant_a, deployment=deployment, bucket=finish - timedelta(minutes=5 * (20 - i)),
            requests=10 if failed else 1, errors=10 if failed else 0,
            ok_output_tokens=0 if failed else 3_000, ok_input_tokens=0 if failed else 2_000,
        )  # fmt: skip

    assert plan_inputs(now=now).peak_ratios["m"] == 2
