"""The flywheel's alert kinds (kpis.md section 3c): `gpu_waste` and `kpi_below_band`, their
rules through the API (operators only), their findings through the `alerts` job, fired
once and resolved once, and their evaluation in a query count flat in rules and pools.

The world: now is 16 December 2026 10:00 UTC and nothing waits for the fold, so a
`gpu_waste` window of 3 h is [07:00, 10:00). Pool h100-a has 100 healthy GPUs, all busy
from midnight, 50 of them busy from 06:30 (carried into the window): A = 100 × 3 = 300
healthy GPU-hours, B = 50 × 3 = 150 busy, idle A − B = 150 GPU-hours, 50% of A, above
10%. Its cost model in force at 07:00 (from January): 43,800 per GPU over 60 months, 1.2 kW
per GPU at idle ratio 0.3, PUE 1.25, 0.10 per kWh, hosting 73 and network and storage
36.5 per GPU-month; an idle GPU-hour costs 43,800 / 60 / 730 = 1.00 of depreciation,
(73 + 36.5) / 730 = 0.15 of hosting and 1.2 × 0.3 × 1.25 × 0.10 = 0.045 of energy: 1.195;
the 150 idle GPU-hours cost 150 × 1.195 = 179.25. (A version from 08:00 doubling the
capex is not in force at the window's start.) Pool h100-b, the control, has 95 of its 100
healthy GPUs busy: 15 idle GPU-hours of 300, 5%, below 10%."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from flywheel.domain.alerts import idle_cost_per_gpu_hour
from flywheel.domain.tfom import CostModel as EngineCostModel
from flywheel.models import KpiSnapshot
from flywheel.selectors.alerts import gpu_waste_evaluate, kpi_below_band_evaluate
from metering.models import FoldPending, Pool
from metering.services.factory import CapacityIn, capacity_upsert
from portal.alert_kinds import alert_shown
from portal.alerts import alerts_evaluate
from portal.models import Alert, AlertRule, Event
from tests.flywheel.factories import make_cost_model

pytestmark = pytest.mark.both_backends

MIDNIGHT = datetime(2026, 12, 16, tzinfo=UTC)


def _at(hours: float) -> datetime:
    return MIDNIGHT + timedelta(hours=hours)


@pytest.fixture
def operator(users, token_client):
    return token_client(users["operator"], scopes=["read", "notify"])


def _rule(client, **body) -> dict:
    response = client.post("/api/v1/alert-rules", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def _pool(slug: str, gpus: int = 100) -> Pool:
    return Pool.objects.create(slug=slug, name=slug.upper(), gpu_type="H100", gpu_count=gpus)


def _capacity(pool: Pool, *steps: tuple[float, int, int]) -> None:
    """(hours after midnight, healthy, busy) of the pool's installed GPUs."""
    capacity_upsert(
        samples=[
            CapacityIn(
                pool=pool,
                time=_at(hours),
                gpus_installed=pool.gpu_count,
                gpus_healthy=healthy,
                gpus_busy=busy,
            )
            for hours, healthy, busy in steps
        ]
    )


@pytest.fixture
def pools(db):
    wasteful, control = _pool("h100-a"), _pool("h100-b")
    _capacity(wasteful, (0, 100, 100), (6.5, 100, 50))
    _capacity(control, (0, 100, 95))
    idle_terms = {"hosting_per_gpu_month": "73", "network_storage_per_gpu_month": "36.5"}
    make_cost_model(wasteful, **idle_terms)
    make_cost_model(wasteful, effective_from=_at(8), capex_per_gpu="87600", **idle_terms)
    make_cost_model(control, **idle_terms)
    return wasteful, control


# ---------------------------------------------------------------- gpu_waste


def test_50_idle_healthy_gpus_for_3_hours_fire_once_with_their_idle_cost_by_hand(
    pools, operator, now
):
    rule = _rule(operator, kind="gpu_waste")
    assert (rule["params"], rule["scope"], rule["tenant"]) == (
        {"window_hours": 3, "threshold_pct": "10"},
        {},
        None,
    )

    assert alerts_evaluate(now=now) == {"rules": 1, "fired": 1, "resolved": 0}
    assert alerts_evaluate(now=now) == {"rules": 1, "fired": 0, "resolved": 0}  # once

    alert = Alert.objects.get()  # h100-b, the control, stays quiet (5% idle)
    assert (alert.scope_key, alert.window_start, alert.threshold, alert.value) == (
        "h100-a",
        _at(7),
        "10",
        "50.0%",
    )
    assert (alert.state, alert.level, alert.link) == (
        "firing",
        "warning",
        "/metering/#capacity-h100-a",
    )
    assert alert.figures == {
        "pool": "h100-a",
        "window_start": "2026-12-16T07:00:00Z",
        "window_end": "2026-12-16T10:00:00Z",
        "healthy_gpu_hours": "300.00",
        "busy_gpu_hours": "150.00",
        "idle_gpu_hours": "150.00",
        "idle_pct": "50.0",
        "telemetry": "measured",
        "idle_cost_per_gpu_hour": "1.1950000000",  # 1.00 + 0.15 + 0.045
        "idle_cost": "179.25",  # 150 × 1.195
        "currency": "USD",
    }
    assert alert.summary == (
        "H100-A: 150.00 of 300.00 healthy GPU-hours idle in the last 3 h (50.0%, above 10%), "
        "costing 179.25 USD"
    )
    assert alert_shown(
        kind="gpu_waste", threshold=alert.threshold, value=alert.value, figures=alert.figures
    ) == ("10% idle", "150 GPU-hours idle (50.0%), 179.25 USD")
    fired = Event.objects.get(type="alert.fired")
    assert (fired.tenant, fired.level, fired.data["kind"], fired.data["scope"]) == (
        None,
        "warning",
        "gpu_waste",
        {},
    )
    listed = operator.get("/api/v1/alerts?state=firing").json()["results"]
    assert [(a["kind"], a["scope"], a["value"]) for a in listed] == [
        ("gpu_waste", {"key": "h100-a"}, "50.0%")
    ]

    # At 10:00 the idle GPUs become busy. At 11:00 the window [08:00, 11:00) still holds
    # 50 idle GPUs for 2 h (100 of 300, 33.3%): the same alert, whatever its new onset.
    wasteful, _ = pools
    _capacity(wasteful, (10, 100, 100))
    assert alerts_evaluate(now=_at(11)) == {"rules": 1, "fired": 0, "resolved": 0}
    # At 13:00 the window [10:00, 13:00) has none idle: resolved, once.
    assert alerts_evaluate(now=_at(13)) == {"rules": 1, "fired": 0, "resolved": 1}
    assert alerts_evaluate(now=_at(13)) == {"rules": 1, "fired": 0, "resolved": 0}
    alert.refresh_from_db()
    assert (alert.state, alert.resolved_at) == ("resolved", _at(13))
    assert Event.objects.filter(type="alert.fired").count() == 1
    assert Event.objects.filter(type="alert.resolved").count() == 1


def test_a_rule_on_one_pool_with_its_own_window_and_threshold(pools, operator, now):
    # h100-b over 6 h [04:00, 10:00): 5 idle of 100 healthy, 30 of 600 GPU-hours, 5% > 4%.
    _rule(
        operator,
        kind="gpu_waste",
        scope={"pool": "h100-b"},
        params={"window_hours": 6, "threshold_pct": "4.0"},
        level="critical",
    )

    assert alerts_evaluate(now=now) == {"rules": 1, "fired": 1, "resolved": 0}

    alert = Alert.objects.get()
    assert (alert.scope_key, alert.window_start, alert.threshold, alert.level) == (
        "h100-b",
        _at(4),
        "4",
        "critical",
    )
    # 1.195 per idle GPU-hour (as h100-a's), 30 × 1.195 = 35.85.
    figures = alert.figures
    assert (figures["idle_gpu_hours"], figures["idle_pct"], figures["idle_cost"]) == (
        "30.00",
        "5.0",
        "35.85",
    )


def test_the_window_ends_at_the_data_horizon_floored_to_the_hour(pools, operator, now):
    # An event accepted at 08:30 still waits for the fold: usage is metered until 08:30,
    # so the window is [05:00, 08:00): 50 idle GPUs from 06:30, 75 of 300 healthy GPU-hours
    # (25%), at 1.195 each (the version in force at 05:00): 89.625, 89.63 to the cent.
    FoldPending.objects.create(
        first_id=1, last_id=1, time_min=_at(8), time_max=_at(8), events=1, queued_at=_at(8.5)
    )
    _rule(operator, kind="gpu_waste")

    alerts_evaluate(now=now)

    alert = Alert.objects.get()
    assert (alert.window_start, alert.value, alert.figures["window_end"]) == (
        _at(5),
        "25.0%",
        "2026-12-16T08:00:00Z",
    )
    assert (alert.figures["idle_gpu_hours"], alert.figures["idle_cost"]) == ("75.00", "89.63")


def test_a_pool_without_a_cost_model_still_fires_without_a_cost(operator, now):
    pool = _pool("l40s", gpus=8)
    _capacity(pool, (0, 8, 0))  # 8 idle GPUs for 3 h: 24 of 24 healthy GPU-hours

    _rule(operator, kind="gpu_waste")
    alerts_evaluate(now=now)

    alert = Alert.objects.get()
    assert (alert.value, alert.figures["idle_gpu_hours"]) == ("100.0%", "24.00")
    assert not {"idle_cost", "idle_cost_per_gpu_hour", "currency"} & alert.figures.keys()
    assert alert.summary.endswith("no cost model in force")


def test_the_idle_cost_of_a_gpu_hour_by_hand():
    model = EngineCostModel(
        capex_per_gpu=Decimal(43800),
        depreciation_months=60,
        power_kw_per_gpu=Decimal("1.2"),
        pue=Decimal("1.25"),
        electricity_price_per_kwh=Decimal("0.10"),
        hosting_per_gpu_month=Decimal(73),
        network_storage_per_gpu_month=Decimal("36.5"),
    )  # idle_power_ratio 0.3 by default

    assert idle_cost_per_gpu_hour(cost_model=model) == Decimal("1.195")


# ---------------------------------------------------------------- kpi_below_band


def _day(scope: str, day: int, *, closed: bool = True, **values) -> KpiSnapshot:
    start = datetime(2026, 12, day, tzinfo=UTC)
    return KpiSnapshot.objects.create(
        scope=scope,
        period_kind="day",
        period_start=start,
        period_end=start + timedelta(days=1),
        telemetry="measured",
        values=values,
        is_closed=closed,
        measured_at=start + timedelta(days=1, minutes=5),
    )


def test_a_closed_days_tef_below_its_threshold_fires_and_a_day_above_stays_quiet(operator, now):
    _pool("h100-a")
    _day("factory", 14, tef=0.42, tfi=0.30)
    _day("h100-a", 14, tef=None, tfi=None)  # nothing in service: never fires
    _day("factory", 16, closed=False, tef=0.10, tfi=0.05)  # the open day is not judged
    rule = _rule(operator, kind="kpi_below_band", params={"kpi": "tef", "threshold": "0.50"})
    assert rule["params"] == {"kpi": "tef", "threshold": "0.5"}
    _rule(operator, kind="kpi_below_band", params={"kpi": "tfi", "threshold": 0.2})  # 0.30
    _rule(
        operator,
        kind="kpi_below_band",
        scope={"pool": "h100-a"},
        params={"kpi": "tef", "threshold": "0.5"},
    )

    assert alerts_evaluate(now=now) == {"rules": 3, "fired": 1, "resolved": 0}
    assert alerts_evaluate(now=now) == {"rules": 3, "fired": 0, "resolved": 0}  # once

    alert = Alert.objects.get()
    assert (alert.rule_id, alert.window_start, alert.threshold, alert.value) == (
        rule["id"],
        datetime(2026, 12, 14, tzinfo=UTC),
        "0.5",
        "0.42",
    )
    # In words and the KPI's unit, wherever it is read (the page, the inbox, webhooks, email).
    assert alert.summary == "TEF of the factory on 14 Dec 2026 was 42.0%, below 50.0%"
    assert alert_shown(
        kind="kpi_below_band", threshold=alert.threshold, value=alert.value, figures=alert.figures
    ) == ("50.0%", "TEF 42.0%")
    assert alert.figures == {
        "kpi": "tef",
        "scope": "factory",
        "day": "2026-12-14",
        "value": "0.42",
        "threshold": "0.5",
        "telemetry": "measured",
        "measured_at": "2026-12-15T00:05:00Z",
    }
    assert alert.link == "/?from=2026-12-14&to=2026-12-15"
    event = Event.objects.get(type="alert.fired")
    assert (event.data["value"], event.data["threshold"], event.data["kind"]) == (
        "0.42",
        "0.5",
        "kpi_below_band",
    )

    # 15 December closes above the band: quiet, and the day below is behind it.
    _day("factory", 15, tef=0.55, tfi=0.31)
    assert alerts_evaluate(now=now) == {"rules": 3, "fired": 0, "resolved": 1}
    assert alerts_evaluate(now=now) == {"rules": 3, "fired": 0, "resolved": 0}
    assert Event.objects.filter(type="alert.resolved").count() == 1


# ---------------------------------------------------------------- rules


def test_bad_params_are_a_400_naming_the_field_and_only_operators_hold_these_kinds(
    users, token_client, operator
):
    _pool("h100-a")
    finance = APIClient()
    finance.force_login(users["finance"])
    member = token_client(users["tenant"], scopes=["read", "notify"])
    tef = {"kpi": "tef", "threshold": "0.5"}
    cases = [
        (operator, "kpi_below_band", {}, {}, 400, "params.kpi"),
        (operator, "kpi_below_band", {"kpi": "tps", "threshold": "0.5"}, {}, 400, "params.kpi"),
        (operator, "kpi_below_band", {"kpi": "tef"}, {}, 400, "params.threshold"),
        (
            operator,
            "kpi_below_band",
            {"kpi": "tef", "threshold": "high"},
            {},
            400,
            "params.threshold",
        ),
        (operator, "kpi_below_band", {"kpi": "tef", "threshold": 0}, {}, 400, "params.threshold"),
        (
            operator,
            "kpi_below_band",
            {"kpi": "tef", "threshold": "-0.1"},
            {},
            400,
            "params.threshold",
        ),
        (operator, "kpi_below_band", {**tef, "days": 2}, {}, 400, "params.days"),
        (operator, "kpi_below_band", tef, {"pool": "nowhere"}, 400, "scope.pool"),
        (operator, "gpu_waste", {"window_hours": 0}, {}, 400, "params.window_hours"),
        (operator, "gpu_waste", {"window_hours": 169}, {}, 400, "params.window_hours"),
        (operator, "gpu_waste", {"window_hours": "3"}, {}, 400, "params.window_hours"),
        (operator, "gpu_waste", {"window_hours": 2.5}, {}, 400, "params.window_hours"),
        (operator, "gpu_waste", {"threshold_pct": 0}, {}, 400, "params.threshold_pct"),
        (operator, "gpu_waste", {"threshold_pct": "100.5"}, {}, 400, "params.threshold_pct"),
        (operator, "gpu_waste", {}, {"pool": "nowhere"}, 400, "scope.pool"),
        (operator, "gpu_waste", {}, {"deployment": "x"}, 400, "scope.deployment"),
        (finance, "gpu_waste", {}, {}, 403, "kind"),
        (finance, "kpi_below_band", tef, {}, 403, "kind"),
        (member, "gpu_waste", {}, {}, 403, "kind"),
        (member, "kpi_below_band", tef, {}, 403, "kind"),
    ]
    for client, kind, params, scope, status, field in cases:
        body = {"kind": kind, "params": params, "scope": scope}
        response = client.post("/api/v1/alert-rules", body, format="json")
        assert response.status_code == status, (body, response.json())
        assert response.json()["errors"][0]["field"] == field, (body, response.json())
    assert not AlertRule.objects.exists()

    rule = _rule(
        operator,
        kind="gpu_waste",
        scope={"pool": "h100-a"},
        params={"window_hours": 168, "threshold_pct": 12.5},
    )
    assert (rule["scope"], rule["params"]) == (
        {"pool": "h100-a"},
        {"window_hours": 168, "threshold_pct": "12.5"},
    )
    changed = operator.patch(
        f"/api/v1/alert-rules/{rule['id']}", {"scope": {"pool": "gone"}}, format="json"
    )
    assert (changed.status_code, changed.json()["errors"][0]["field"]) == (400, "scope.pool")


# ---------------------------------------------------------------- query counts


def _queries(evaluate, rules, now) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as captured:
        findings = evaluate(rules, now).findings
    return len(captured), len(findings)


def test_gpu_waste_reads_as_many_queries_for_several_rules_and_pools_as_for_one(now, db):
    one = _pool("p0")
    _capacity(one, (0, 100, 0))
    make_cost_model(one)
    first = [
        AlertRule.objects.create(
            kind="gpu_waste", params={"window_hours": 3, "threshold_pct": "10"}
        )
    ]
    alone = _queries(gpu_waste_evaluate, first, now)

    for n in (1, 2):
        pool = _pool(f"p{n}")
        _capacity(pool, (n, 100, 0))
        make_cost_model(pool)
    rules = first + [
        AlertRule.objects.create(kind="gpu_waste", scope=scope, params=params)
        for scope, params in [
            ({}, {"window_hours": 24, "threshold_pct": "50"}),
            ({"pool": "p1"}, {"window_hours": 1, "threshold_pct": "1"}),
            ({"pool": "p2"}, {"window_hours": 168, "threshold_pct": "99.5"}),
        ]
    ]
    several = _queries(gpu_waste_evaluate, rules, now)

    assert (alone[1], several[1]) == (1, 3 + 3 + 1 + 1)  # findings: each pool is all idle
    assert alone[0] == several[0]


def test_kpi_below_band_reads_one_query_for_one_rule_and_for_several(now, db):
    for slug in ("p0", "p1"):
        _pool(slug)
        _day(slug, 15, tef=0.1, tfi=0.1)
    _day("factory", 15, tef=0.1, tfi=0.1)
    _day("factory", 14, tef=0.1, tfi=0.1)
    params = {"kpi": "tef", "threshold": "0.5"}
    first = [AlertRule.objects.create(kind="kpi_below_band", params=params)]
    rules = first + [
        AlertRule.objects.create(kind="kpi_below_band", scope={"pool": slug}, params=params)
        for slug in ("p0", "p1")
    ]

    assert _queries(kpi_below_band_evaluate, first, now) == (1, 1)
    assert _queries(kpi_below_band_evaluate, rules, now) == (1, 3)


def test_a_kpi_alert_names_its_day_as_the_pages_name_days(operator, now):
    """5 December, not "05 Dec 2026" (portal.formatting.span_text names every period)."""
    _day("factory", 5, tef=0.42, tfi=0.30)
    _rule(operator, kind="kpi_below_band", params={"kpi": "tef", "threshold": "0.5"})

    alerts_evaluate(now=now)

    assert Alert.objects.get().summary == "TEF of the factory on 5 Dec 2026 was 42.0%, below 50.0%"
