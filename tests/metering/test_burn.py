"""SLO burn alerts (kpis.md section 3c) from the 5-minute buckets the fold writes.

Now is 16 December 2026 10:00 UTC and usage is folded up to now: every window ends at 10:00.
Targets are 0.99 (the versions' default) unless said otherwise; burn = miss share / 0.01.

- m1 (the partial outage): in the last hour, each 5 minutes 70 compliant and 30 failed
  requests; 960 compliant requests in each of the 5 hours before; 30,000 compliant on 14
  December. 1 h: 1,200 requests, 840 compliant, burn 30; 5 min: 100, 70, burn 30 → the
  1h/5m pair fires (critical). 6 h: 6,000, 5,640, miss 6 % → burn exactly 6, not above 6
  (quiet though 30 min burns 30). 3 d: 36,000, 35,640 → burn exactly 1 (quiet).
- m2: each 5 minutes of the last hour 995 compliant, 5 failed: burn 0.5 everywhere (quiet).
- m3: every 6 hours from 13 December 10:00 to 16 December 04:00 (12 blocks), 980
  compliant and 20 failed: 3 d 12,000 / 11,760, burn 2 > 1; 6 h (the 04:00 block) burn 2 >
  1 → the 3d/6h pair fires (warning). 6 h is not above 6, and the last hour has nothing.
- m4: 8 failed requests in each 5 minutes of the last hour: burn 100 everywhere, but 3 d
  holds 96 requests, under min_requests (100): it never fires.
"""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from metering.services.usage.rollup import usage_fold
from portal.alerts import alerts_evaluate
from portal.clock import clock_set
from portal.events import inbox_list
from portal.models import Alert, Event
from tests.billing.factories import make_contract
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.both_backends

NOW = datetime(2026, 12, 16, 10, tzinfo=UTC)
HOUR = timedelta(hours=1)
FIVE = timedelta(minutes=5)


def _events(model, start, *, ok, failed, times=1, every=FIVE, name=""):
    """Per step of `every` from `start`, one event of `ok` compliant requests and one of
    `failed` failed requests (each standing for its count)."""
    items = []
    for step in range(times):
        at = (start + step * every + timedelta(minutes=1)).isoformat()
        for status, count in (("ok", ok), ("error", failed)):
            if count:
                items.append(
                    {"id": f"{model}{name}-{step}-{status}", "time": at, "model": model,
                     "tenant": "tenant-a", "status": status, "requests": count,
                     "input_tokens": count, "output_tokens": count, "ttft_ms": 500}
                )  # fmt: skip
    return items


@pytest.fixture
def admin_api(users, token_client):
    return token_client(users["operator"], scopes=["ingest", "read", "notify"])


@pytest.fixture
def traffic(admin_api, tenant_a, now):
    for model in ("m1", "m2", "m3", "m4"):
        make_deployment(model=model, ttft=2000)
    last_hour = NOW - HOUR
    items = [
        *_events("m1", last_hour, ok=70, failed=30, times=12),
        *_events("m1", NOW - 6 * HOUR, ok=960, failed=0, times=5, every=HOUR, name="h"),
        *_events("m1", NOW - 48 * HOUR, ok=30_000, failed=0, name="d"),
        *_events("m2", last_hour, ok=995, failed=5, times=12),
        *_events("m3", NOW - 72 * HOUR, ok=980, failed=20, times=12, every=6 * HOUR),
        *_events("m4", last_hour, ok=0, failed=8, times=12),
    ]  # fmt: skip
    for start in range(0, len(items), 100):
        response = admin_api.post("/api/v1/usage/events", items[start : start + 100], format="json")
        assert response.status_code == 200, response.json()
    usage_fold()


def _rule(client, status=201, **body):
    response = client.post("/api/v1/alert-rules", body, format="json")
    assert response.status_code == status, response.json()
    return response.json()


def _firing():
    return sorted(
        (a.scope_key, a.threshold, a.level, a.value)
        for a in Alert.objects.filter(state=Alert.State.FIRING)
    )


def test_the_burn_of_every_window_pair_by_hand(traffic, admin_api, users):
    _rule(admin_api, kind="slo_burn", level="info")

    assert alerts_evaluate(now=NOW) == {"rules": 1, "fired": 2, "resolved": 0}
    assert _firing() == [
        ("m1@h100-a", "1h/5m", "critical", "30.0"),
        ("m3@h100-a", "3d/6h", "warning", "2.0"),
    ]
    m1 = Alert.objects.get(scope_key="m1@h100-a")
    assert m1.figures == {
        "deployment": "m1@h100-a",
        "target": "0.99",
        "factor": "14.4",
        "window_end": "2026-12-16T10:00:00Z",
        "long": {"requests": 1200, "compliant": 840, "burn": "30.0000"},
        "short": {"requests": 100, "compliant": 70, "burn": "30.0000"},
    }
    assert m1.window_start == NOW - FIVE
    m3 = Alert.objects.get(scope_key="m3@h100-a")
    assert (m3.figures["long"], m3.figures["short"]) == (
        {"requests": 12_000, "compliant": 11_760, "burn": "2.0000"},
        {"requests": 1_000, "compliant": 980, "burn": "2.0000"},
    )

    # Firing twice sends once.
    assert alerts_evaluate(now=NOW)["fired"] == 0
    assert Event.objects.filter(type="alert.fired").count() == 2
    # The operators' inbox has them; finance's does not (it holds no burn rule).
    assert inbox_list(user=users["operator"]).count() == 2
    assert not inbox_list(user=users["finance"]).exists()


def test_a_long_window_under_min_requests_never_fires_until_the_rule_lowers_it(traffic, admin_api):
    _rule(admin_api, kind="slo_burn", scope={"deployment": "m4@h100-a"})
    assert alerts_evaluate(now=NOW)["fired"] == 0  # 96 requests in 3 d: under 100

    _rule(
        admin_api, kind="slo_burn", scope={"deployment": "m4@h100-a"}, params={"min_requests": 90}
    )
    alerts_evaluate(now=NOW)

    # Every window burns 100 (all failed): 1h/5m and 6h/30m fire; 3d/6h too (warning).
    assert _firing() == [
        ("m4@h100-a", "1h/5m", "critical", "100.0"),
        ("m4@h100-a", "3d/6h", "warning", "100.0"),
        ("m4@h100-a", "6h/30m", "critical", "100.0"),
    ]


def test_a_tenant_rule_falls_back_to_its_contract_target_and_a_rule_target_wins(
    traffic, tenant_a, users, token_client
):
    member = token_client(users["tenant"], scopes=["read", "notify"])
    make_contract(tenant_a, slo_target=Decimal("0.95"))
    _rule(member, kind="slo_burn")
    # Target 0.95: m1 burns 0.30 / 0.05 = 6 over 1 h (≤ 14.4), 0.06 / 0.05 = 1.2 over 6 h
    # (≤ 6), 0.01 / 0.05 = 0.2 over 3 d (≤ 1); m3 0.4; m2 0.1: quiet.
    assert alerts_evaluate(now=NOW)["fired"] == 0

    _rule(member, kind="slo_burn", scope={"deployment": "m2@h100-a"}, params={"target": "0.999"})
    alerts_evaluate(now=NOW)

    # m2 at 0.999: burn 0.005 / 0.001 = 5 everywhere: above 1 over 3 d and 6 h (warning).
    assert _firing() == [("m2@h100-a", "3d/6h", "warning", "5.0")]


def test_an_alert_resolves_once_when_its_windows_cool(traffic, admin_api):
    _rule(admin_api, kind="slo_burn")
    alerts_evaluate(now=NOW)

    later = NOW + 7 * HOUR  # the last hour and the last 6 hours hold no request
    clock_set(later)
    usage_fold()
    assert alerts_evaluate(now=later) == {"rules": 1, "fired": 0, "resolved": 2}
    assert alerts_evaluate(now=later)["resolved"] == 0
    assert Event.objects.filter(type="alert.resolved").count() == 2


def test_windows_end_at_the_last_complete_bucket_usage_is_folded_through(traffic, admin_api):
    _rule(admin_api, kind="slo_burn")
    # The fold last completed at 10:00: evaluated at 10:07, the windows still end at 10:00
    # (ending at 10:05, the 5-minute window would hold nothing and m1 would not fire).
    assert alerts_evaluate(now=NOW + timedelta(minutes=7))["fired"] == 2
    assert Alert.objects.get(scope_key="m1@h100-a").figures["window_end"] == "2026-12-16T10:00:00Z"


def test_bad_params_and_scopes_are_400s_naming_the_field(admin_api, tenant_a):
    make_deployment(model="m1")
    for body, field in (
        ({"params": {"target": "1.2"}}, "params.target"),
        ({"params": {"target": "x"}}, "params.target"),
        ({"params": {"min_requests": 0}}, "params.min_requests"),
        ({"params": {"window": 3}}, "params.window"),
        ({"scope": {"deployment": "nope"}}, "scope.deployment"),
    ):
        errors = _rule(admin_api, status=400, kind="slo_burn", **body)["errors"]
        assert [e["field"] for e in errors] == [field], body


def test_the_evaluation_reads_as_many_queries_for_one_rule_as_for_many(traffic, admin_api):
    _rule(admin_api, kind="slo_burn")
    from metering.selectors.burn import slo_burn_evaluate
    from portal.models import AlertRule

    def queries():
        rules = list(AlertRule.objects.select_related("tenant"))
        with CaptureQueriesContext(connection) as captured:
            slo_burn_evaluate(rules, NOW)
        return len(captured)

    one = queries()
    for model in ("m1", "m2", "m3", "m4"):
        _rule(admin_api, kind="slo_burn", scope={"deployment": f"{model}@h100-a"})
    assert queries() == one
