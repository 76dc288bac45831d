"""Metering's alert kinds (kpis.md section 3c): reconciliation drift, a silent source and a
scrape target down, held by operators through /api/v1/alert-rules and evaluated by the
`alerts` job from metering's read models: each fires once while its condition holds and
resolves once after it, in a query count flat in rules, deployments, sources and targets.

The world: now is 16 December 2026 10:00 UTC; the fold never ran and nothing waits for it,
so usage is metered until now and the last whole hours are 08:00 and 09:00."""

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from metering.models import Deployment, EngineHourly, FoldPending, ScrapeTarget
from metering.selectors.alerts import (
    reconciliation_drift_evaluate,
    scrape_down_evaluate,
    source_silent_evaluate,
)
from metering.selectors.ingestion import source_list
from metering.services.telemetry.scrape import scrape_target
from metering.services.usage.rollup import usage_fold
from portal import clock
from portal.alerts import alerts_evaluate
from portal.models import Alert, AlertRule, Event
from tests.metering.factories import event, make_deployment, make_hourly_usage

pytestmark = pytest.mark.both_backends

HOUR = timedelta(hours=1)
M = 1_000_000
VLLM_PAGE = (Path(__file__).resolve().parent / "fixtures" / "vllm_v1_synthetic.prom").read_text()


@pytest.fixture
def operator(users, token_client):
    """The operator's API client: ingests usage and holds alert rules."""
    return token_client(users["operator"], scopes=["ingest", "read", "notify"])


def _rule(client, **body) -> dict:
    response = client.post("/api/v1/alert-rules", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def _send(client, source: str, *, at, model="llama-70b", i=0) -> None:
    """A batch of one event from `source`, received at `at` (the clock is set to it)."""
    clock.clock_set(at)
    item = event(i, time=at.isoformat(), model=model, source=source)
    response = client.generic(
        "POST", "/api/v1/usage/events", json.dumps([item]), content_type="application/json"
    )
    assert response.status_code == 200, response.json()


def _engine_hour(deployment, hour, *, engine: int, metered: int, tenant) -> None:
    """A reconciled deployment-hour: `engine` generation tokens counted over the whole hour
    (120 scrape intervals) against `metered` output tokens of `tenant`'s usage."""
    EngineHourly.objects.create(
        deployment=deployment, hour=hour, intervals=120, generation_tokens=engine
    )
    make_hourly_usage(tenant, deployment, hour, output_tokens=metered)


def _refused(url: str, timeout: float) -> str:
    raise ConnectionRefusedError("connection refused")


def _events(type_: str) -> list[Event]:
    return list(Event.objects.filter(type=type_).order_by("pk"))


# ---------------------------------------------------------------- reconciliation drift


def test_reconciliation_drift_fires_after_two_flagged_hours_once_and_resolves_once(
    operator, tenant_a, now
):
    drifting = make_deployment(model="llama-70b")
    steady = make_deployment(model="qwen-32b")
    once = make_deployment(model="mistral-7b")
    # llama: 06:00 agrees; 07:00, 08:00, 09:00 engine 1,000,000 against 950,000 metered:
    # 50,000 apart (5.0%) > max(1% of 1,000,000 = 10,000, 10,000): flagged, a run from 07:00.
    _engine_hour(drifting, now - 4 * HOUR, engine=M, metered=M, tenant=tenant_a)
    for back in (3, 2, 1):
        _engine_hour(drifting, now - back * HOUR, engine=M, metered=950_000, tenant=tenant_a)
    # qwen (the control): 4,000,000 against 3,980,000 both hours: 20,000 apart (0.5%),
    # within max(40,000, 10,000): never flagged.
    for back in (2, 1):
        _engine_hour(steady, now - back * HOUR, engine=4 * M, metered=3_980_000, tenant=tenant_a)
    # mistral: 08:00 5,000 apart (within 10,000), 09:00 50,000 apart: one flagged hour only.
    _engine_hour(once, now - 2 * HOUR, engine=M, metered=995_000, tenant=tenant_a)
    _engine_hour(once, now - HOUR, engine=M, metered=950_000, tenant=tenant_a)
    every = _rule(operator, kind="reconciliation_drift")
    hourly = _rule(
        operator,
        kind="reconciliation_drift",
        scope={"deployment": "mistral-7b@h100-a"},
        params={"hours": 1},
    )
    assert (every["params"], every["scope"], hourly["params"]) == ({"hours": 2}, {}, {"hours": 1})

    assert alerts_evaluate(now=now) == {"rules": 2, "fired": 2, "resolved": 0}
    assert alerts_evaluate(now=now) == {"rules": 2, "fired": 0, "resolved": 0}  # once

    fired = Alert.objects.order_by("pk")
    assert [(a.rule_id, a.scope_key, a.window_start, a.threshold, a.value) for a in fired] == [
        (every["id"], "llama-70b@h100-a", now - 3 * HOUR, "2", "+5.0%"),  # the run's 07:00
        (hourly["id"], "mistral-7b@h100-a", now - HOUR, "1", "+5.0%"),
    ]
    # qwen with hours=2 (0.5%) and mistral with hours=2 (one flagged hour) stay quiet.
    events = _events("alert.fired")
    assert len(events) == 2
    assert events[0].summary == (
        "llama-70b@h100-a: engine and metered output tokens disagree beyond tolerance in each "
        "of the last 2 whole hours (flagged since 16 Dec 07:00 UTC); 09:00: engine 1,000,000, "
        "metered 950,000 (+5.0%)"
    )
    assert events[0].data["figures"] == {
        "hours": [
            {
                "hour": "2026-12-16T08:00:00Z",
                "engine_output_tokens": 1_000_000,
                "metered_output_tokens": 950_000,
                "difference": 50_000,
            },
            {
                "hour": "2026-12-16T09:00:00Z",
                "engine_output_tokens": 1_000_000,
                "metered_output_tokens": 950_000,
                "difference": 50_000,
            },
        ],
        "tolerance_ratio": "0.01",
        "tolerance_tokens": 10_000,
    }
    assert (events[0].data["scope"], events[0].link) == ({}, "/metering/#reconciliation")
    assert (events[0].tenant, events[0].for_factory) == (None, True)

    # 10:00 agrees for both: at 11:00 the last two hours (09:00, 10:00) are not all flagged.
    later = now + HOUR
    _engine_hour(drifting, now, engine=M, metered=M, tenant=tenant_a)
    _engine_hour(once, now, engine=M, metered=M, tenant=tenant_a)
    assert alerts_evaluate(now=later) == {"rules": 2, "fired": 0, "resolved": 2}
    assert alerts_evaluate(now=later) == {"rules": 2, "fired": 0, "resolved": 0}  # once
    assert len(_events("alert.resolved")) == 2
    assert set(Alert.objects.values_list("state", flat=True)) == {"resolved"}


def test_reconciliation_drift_reads_the_hours_up_to_the_folds_horizon(operator, tenant_a, now):
    drifting = make_deployment(model="llama-70b")
    # Flagged at 06:00 and 07:00 (1,000,000 against 900,000), fine at 08:00 and 09:00.
    for back, metered in ((4, 900_000), (3, 900_000), (2, M), (1, M)):
        _engine_hour(drifting, now - back * HOUR, engine=M, metered=metered, tenant=tenant_a)
    _rule(operator, kind="reconciliation_drift", scope={"deployment": "llama-70b@h100-a"})

    assert alerts_evaluate(now=now)["fired"] == 0  # metered until 10:00: 08:00, 09:00 agree

    # An event accepted at 08:30 still waits for the fold: usage is metered until 08:30,
    # so the last whole hours covered are 06:00 and 07:00, both flagged.
    _send(operator, "gw-eu", at=now - 90 * timedelta(minutes=1))
    clock.clock_set(now)
    assert FoldPending.objects.count() == 1
    assert alerts_evaluate(now=now)["fired"] == 1
    alert = Alert.objects.get()
    assert (alert.window_start, alert.value) == (now - 4 * HOUR, "+10.0%")


# ---------------------------------------------------------------- source silent


def test_a_source_silent_for_20_minutes_while_its_engines_grow_fires_once_and_resolves_once(
    operator, tenant_a, now
):
    deployment = make_deployment()
    # gw-eu's last batch at 09:40 (20 minutes before now); the control gw-us sends at 09:40
    # and at 09:55 (5 minutes before now), both metering llama-70b@h100-a.
    _send(operator, "gw-eu", at=now - timedelta(minutes=20), i=1)
    _send(operator, "gw-us", at=now - timedelta(minutes=20), i=2)
    _send(operator, "gw-us", at=now - timedelta(minutes=5), i=3)
    clock.clock_set(now)
    every = _rule(operator, kind="source_silent")
    patient = _rule(
        operator, kind="source_silent", scope={"source": "gw-eu"}, params={"minutes": 30}
    )
    assert (every["params"], patient["scope"]) == ({"minutes": 15}, {"source": "gw-eu"})

    # Quiet engines: a quiet source is idle, not silent.
    assert alerts_evaluate(now=now) == {"rules": 2, "fired": 0, "resolved": 0}

    # The engine generated 900,000 tokens in the 09:00 hour, last observed at 09:59:30,
    # after gw-eu's last batch: gw-eu quiet 20 ≥ 15 minutes is silent; gw-us quiet 5 is not,
    # nor is gw-eu by the 30-minute rule.
    EngineHourly.objects.create(
        deployment=deployment, hour=now - HOUR, intervals=120, generation_tokens=900_000,
        last_observed_at=now - timedelta(seconds=30),
    )  # fmt: skip
    assert alerts_evaluate(now=now) == {"rules": 2, "fired": 1, "resolved": 0}
    assert alerts_evaluate(now=now) == {"rules": 2, "fired": 0, "resolved": 0}  # once

    alert = Alert.objects.get()  # window start: the last batch, 09:40, + 15 minutes
    assert (alert.rule_id, alert.scope_key, alert.window_start, alert.threshold, alert.value) == (
        every["id"], "gw-eu", now - timedelta(minutes=5), "15", "20 min",
    )  # fmt: skip
    [fired] = _events("alert.fired")
    assert fired.summary == (
        "Source gw-eu has sent no usage for 20 minutes (last batch 16 Dec 09:40 UTC) while "
        "the engines of llama-70b@h100-a keep generating"
    )
    assert fired.data["figures"] == {
        "last_received_at": "2026-12-16T09:40:00Z",
        "last_event_at": "2026-12-16T09:40:00Z",
        "quiet_minutes": 20,
        "deployments": ["llama-70b@h100-a"],
        "engine_observed_at": "2026-12-16T09:59:30Z",
    }
    # The metering page reads the same (the default 15 minutes).
    assert {row.source: row.state for row in source_list(now=now)} == {
        "gw-eu": "silent",
        "gw-us": "active",
    }
    shown = operator.get("/api/v1/alerts?state=firing").json()["results"]
    assert [(a["kind"], a["scope"]) for a in shown] == [("source_silent", {"key": "gw-eu"})]

    # gw-eu sends again at 10:05: resolved, once; gw-us (quiet 10 minutes) stays quiet.
    later = now + timedelta(minutes=5)
    _send(operator, "gw-eu", at=later, i=4)
    assert alerts_evaluate(now=later) == {"rules": 2, "fired": 0, "resolved": 1}
    assert alerts_evaluate(now=later) == {"rules": 2, "fired": 0, "resolved": 0}
    assert len(_events("alert.resolved")) == 1
    assert len(_events("alert.fired")) == 1


# ---------------------------------------------------------------- scrape down


def test_a_target_failing_4_scrapes_fires_once_and_resolves_once_after_recovery(operator, now):
    deployment = make_deployment()
    down, flaky = (
        ScrapeTarget.objects.create(
            url=f"http://vllm-{n}:8000/metrics", kind="vllm", pool=deployment.pool,
            deployment=deployment,
        )
        for n in (0, 1)
    )  # fmt: skip
    # vllm-0 fails at 09:58:30, 09:59:00, 09:59:30 and 10:00:00; vllm-1 the last three only.
    for back in (3, 2, 1, 0):
        at = now - back * timedelta(seconds=30)
        scrape_target(target=down, now=at, fetch=_refused)
        if back < 3:
            scrape_target(target=flaky, now=at, fetch=_refused)
    every = _rule(operator, kind="scrape_down")
    assert every["params"] == {"failures": 4}

    assert alerts_evaluate(now=now) == {"rules": 1, "fired": 1, "resolved": 0}
    assert alerts_evaluate(now=now) == {"rules": 1, "fired": 0, "resolved": 0}  # once

    alert = Alert.objects.get()
    # Failing since 10:00:00 − (4 − 1) × 30 s = 09:58:30, its first failure.
    assert (alert.scope_key, alert.window_start, alert.threshold, alert.value) == (
        str(down.pk), now - timedelta(seconds=90), "4", "4 failures",
    )  # fmt: skip
    [fired] = _events("alert.fired")
    assert fired.summary == (
        "Scrape target http://vllm-0:8000/metrics (vLLM, pool h100-a) failed its last 4 "
        "scrapes (failing since about 16 Dec 09:58:30 UTC): ConnectionRefusedError: "
        "connection refused"
    )
    assert fired.data["figures"] == {
        "url": "http://vllm-0:8000/metrics",
        "kind": "vllm",
        "pool": "h100-a",
        "consecutive_failures": 4,
        "last_scraped_at": "2026-12-16T10:00:00Z",
        "last_error": "ConnectionRefusedError: connection refused",
    }

    # vllm-0 answers at 10:00:30: resolved, once; vllm-1 fails a 4th time and fires.
    later = now + timedelta(seconds=30)
    assert scrape_target(target=down, now=later, fetch=lambda url, timeout: VLLM_PAGE).is_ok
    assert alerts_evaluate(now=later) == {"rules": 1, "fired": 0, "resolved": 1}
    assert alerts_evaluate(now=later) == {"rules": 1, "fired": 0, "resolved": 0}
    assert len(_events("alert.resolved")) == 1
    scrape_target(target=flaky, now=later, fetch=_refused)
    assert alerts_evaluate(now=later) == {"rules": 1, "fired": 1, "resolved": 0}
    assert Alert.objects.get(state="firing").scope_key == str(flaky.pk)


def test_a_scoped_scrape_down_rule_watches_its_target_only(operator, now):
    deployment = make_deployment()
    watched, other = (
        ScrapeTarget.objects.create(
            url=f"http://vllm-{n}:8000/metrics", kind="vllm", pool=deployment.pool
        )
        for n in (0, 1)
    )
    for back in (1, 0):
        for target in (watched, other):
            scrape_target(target=target, now=now - back * timedelta(seconds=30), fetch=_refused)
    rule = _rule(
        operator, kind="scrape_down", scope={"scrape_target": watched.pk}, params={"failures": 2}
    )

    assert alerts_evaluate(now=now)["fired"] == 1
    assert Alert.objects.get().scope_key == str(watched.pk)
    ScrapeTarget.objects.filter(pk=watched.pk).update(enabled=False)
    assert alerts_evaluate(now=now)["resolved"] == 1  # a disabled target is not watched
    assert AlertRule.objects.get().pk == rule["id"]


# ---------------------------------------------------------------- rules


def test_only_operators_hold_these_kinds_and_bad_params_or_scopes_name_their_field(
    operator, users, token_client
):
    make_deployment()
    _send(operator, "gw-eu", at=clock.now())
    target = ScrapeTarget.objects.create(
        url="http://vllm-0:8000/metrics", kind="vllm", pool=Deployment.objects.get().pool
    )
    finance = token_client(users["finance"], scopes=["read", "notify"])
    member = token_client(users["tenant"], scopes=["read", "notify"])
    kinds = ("reconciliation_drift", "source_silent", "scrape_down")
    for client in (finance, member):
        for kind in kinds:
            refused = client.post("/api/v1/alert-rules", {"kind": kind}, format="json")
            assert (refused.status_code, refused.json()["errors"][0]["field"]) == (403, "kind")

    cases = [
        ("reconciliation_drift", {"params": {"hours": 0}}, "params.hours"),
        ("reconciliation_drift", {"params": {"hours": "2"}}, "params.hours"),
        ("reconciliation_drift", {"params": {"hours": True}}, "params.hours"),
        ("reconciliation_drift", {"params": {"hours": 169}}, "params.hours"),
        ("reconciliation_drift", {"params": {"minutes": 5}}, "params.minutes"),
        ("reconciliation_drift", {"scope": {"deployment": "nope@h100-a"}}, "scope.deployment"),
        ("reconciliation_drift", {"scope": {"source": "gw-eu"}}, "scope.source"),
        ("source_silent", {"params": {"minutes": 0}}, "params.minutes"),
        ("source_silent", {"params": {"minutes": 1440}}, "params.minutes"),
        ("source_silent", {"params": {"minutes": 2.5}}, "params.minutes"),
        ("source_silent", {"scope": {"source": "gw-nowhere"}}, "scope.source"),
        ("scrape_down", {"params": {"failures": -1}}, "params.failures"),
        ("scrape_down", {"params": {"failures": None}}, "params.failures"),
        ("scrape_down", {"scope": {"scrape_target": target.pk + 1}}, "scope.scrape_target"),
        ("scrape_down", {"scope": {"scrape_target": str(target.pk)}}, "scope.scrape_target"),
        ("scrape_down", {"scope": {"pool": "h100-a"}}, "scope.pool"),
        ("scrape_down", {"tenant": "tenant-a"}, "tenant"),  # the factory's plumbing
        ("source_silent", {"tenant": "tenant-a"}, "tenant"),
    ]
    for kind, body, field in cases:
        response = operator.post("/api/v1/alert-rules", {"kind": kind, **body}, format="json")
        assert response.status_code == 400, (kind, body, response.json())
        assert response.json()["errors"][0]["field"] == field, (kind, body, response.json())
    assert not AlertRule.objects.exists()

    created = [
        _rule(operator, kind="reconciliation_drift", scope={"deployment": "llama-70b@h100-a"}),
        _rule(operator, kind="source_silent", scope={"source": "gw-eu"}, params={"minutes": 5}),
        _rule(operator, kind="scrape_down", scope={"scrape_target": target.pk}),
    ]
    assert [(r["kind"], r["params"]) for r in created] == [
        ("reconciliation_drift", {"hours": 2}),
        ("source_silent", {"minutes": 5}),
        ("scrape_down", {"failures": 4}),
    ]
    changed = operator.patch(
        f"/api/v1/alert-rules/{created[2]['id']}", {"params": {"failures": 0}}, format="json"
    )
    assert (changed.status_code, changed.json()["errors"][0]["field"]) == (400, "params.failures")
    assert AlertRule.objects.get(pk=created[2]["id"]).params == {"failures": 4}


# ---------------------------------------------------------------- queries


def test_each_evaluation_reads_as_many_queries_for_8_of_everything_as_for_2(
    operator, tenant_a, now
):
    """Every deployment drifting, every source silent, every target down, each watched by a
    rule of its own and by one rule on everything: the findings grow, the queries do not."""

    def world(count: int) -> list[int]:
        AlertRule.objects.all().delete()
        for n in range(Deployment.objects.count(), count):
            deployment = make_deployment(model=f"m{n}")
            for back in (2, 1):
                _engine_hour(deployment, now - back * HOUR, engine=M, metered=0, tenant=tenant_a)
            _send(operator, f"gw-{n}", at=now - timedelta(minutes=20), model=f"m{n}", i=n)
            EngineHourly.objects.filter(deployment=deployment).update(
                last_observed_at=now - timedelta(minutes=1)
            )
            target = ScrapeTarget.objects.create(
                url=f"http://vllm-{n}:8000/metrics", kind="vllm", pool=deployment.pool
            )
            for back in range(4):
                scrape_target(target=target, now=now - back * timedelta(seconds=30), fetch=_refused)
        clock.clock_set(now)
        usage_fold()  # metered until now: the last whole hours are 08:00 and 09:00
        deployments = list(Deployment.objects.values_list("slug", flat=True))
        sources = [f"gw-{n}" for n in range(count)]
        targets = list(ScrapeTarget.objects.values_list("pk", flat=True))
        kinds = [
            ("reconciliation_drift", reconciliation_drift_evaluate, "deployment", deployments,
             {"hours": 2}),
            ("source_silent", source_silent_evaluate, "source", sources, {"minutes": 15}),
            ("scrape_down", scrape_down_evaluate, "scrape_target", targets, {"failures": 4}),
        ]  # fmt: skip
        reads = []
        for kind, evaluate, key, values, params in kinds:
            rules = [AlertRule.objects.create(kind=kind, params=params)]
            rules += [
                AlertRule.objects.create(kind=kind, scope={key: value}, params=params)
                for value in values
            ]
            with CaptureQueriesContext(connection) as queries:
                evaluation = evaluate(rules, now)
            assert len(evaluation.findings) == 2 * len(values) == 2 * count, kind
            reads.append(len(queries))
        return reads

    few = world(2)
    many = world(8)  # 6 more of each beside the 2
    # The fold's pending events and mark (one query), engine, OTLP and metered hours; sources
    # seen and engines; targets.
    assert few == many == [4, 2, 1]
