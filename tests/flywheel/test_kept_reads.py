"""Goal 21's three reads keep what they make in the shared cache (portal.kept) under keys that
name the data it was made from: the Overview of closed days (closed_days_stamp), the usage
API's page and count (usage_stamp and the SQL, the user's scope in it), Metering's usage by
pool; and the SLA page its month's sums (usage_stamp and the SQL). A late event of a closed day, folded, rated and measured, moves every key: each
answer then is what it is read afresh (the cache emptied), never the kept one; and a tenant
member never gets the page kept for the operator.

The world: now is 16 December 2026 10:23:45 UTC; pool p1 (10 GPUs, no capacity samples) is
in service from 09:00 on the 15th, the hour of its first usage. tenant-a sent 500 output
tokens at 09:30 on the 15th and tenant-b 700 at 10:30; the measure stage closed the 15th.
Then tenant-a's gateway sends a late event of that day: 1,000 output tokens at 11:00."""

import re
from datetime import UTC, datetime

import pytest
from django.core.cache import cache

from flywheel.selectors.measurement import closed_days_stamp
from tests.flywheel.factories import api_post, llama_on_p1

pytestmark = pytest.mark.both_backends

NOW = datetime(2026, 12, 16, 10, 23, 45, tzinfo=UTC)
DAY = "from=2026-12-15&to=2026-12-16"


def _event(event_id: str, tenant: str, at: str, output: int) -> dict:
    return {"id": event_id, "time": at, "tenant": tenant, "model": "llama-70b",
            "input_tokens": 0, "output_tokens": output}  # fmt: skip


@pytest.fixture
def api(users, token_client):
    return token_client(users["operator"], scopes=["ingest", "read", "admin"])


@pytest.fixture
def send(api, django_capture_on_commit_callbacks):
    """Post events; every stage runs as the worker would once their transaction commits."""

    def post(*events: dict) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            api_post(api, "/api/v1/usage/events", list(events))

    return post


@pytest.fixture
def factory(api, tenant_a, tenant_b, send):
    llama_on_p1(api)
    for tenant in ("tenant-a", "tenant-b"):
        api_post(api, "/api/v1/contracts", {"tenant": tenant, "kind": "paid",
                                         "effective_from": "2026-01-01T00:00:00Z"})  # fmt: skip
    send(
        _event("a-early", "tenant-a", "2026-12-15T09:30:00Z", 500),
        _event("b-early", "tenant-b", "2026-12-15T10:30:00Z", 700),
    )


_CSRF = re.compile(r'(name="csrfmiddlewaretoken" value="|"X-CSRFToken": ")[^"]+')


def _page(client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, path
    return _CSRF.sub(r"\1", response.content.decode())


def _usage(client) -> dict:
    response = client.get(f"/api/v1/usage?{DAY}")
    assert response.status_code == 200, response.json()
    return response.json()


def _output(answer: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in answer["results"]:
        out[row["tenant"]] = out.get(row["tenant"], 0) + row["output_tokens"]
    return out


def _afresh(read):
    """What `read` answers with nothing kept."""
    cache.clear()
    return read()


@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_a_late_event_of_a_closed_day_changes_every_kept_answer(
    factory, api, send, users, session_client, token_client, now
):
    member = token_client(users["tenant"], scopes=["read"])
    staff = session_client(users["operator"])

    def overview() -> str:
        return _page(staff, f"/?{DAY}")

    def metering() -> str:
        return _page(staff, f"/metering/?{DAY}")

    def sla() -> str:
        return _page(staff, "/billing/sla/?month=2026-12")

    start, end = datetime(2026, 12, 15, tzinfo=UTC), datetime(2026, 12, 16, tzinfo=UTC)
    stamp = closed_days_stamp(start=start, end=end, slugs=["p1"])
    assert stamp is not None  # the day is closed: the Overview of it is kept
    before = {"overview": overview(), "metering": metering(), "sla": sla(), "usage": _usage(api)}
    assert _output(before["usage"]) == {"tenant-a": 500, "tenant-b": 700}
    # Read again, each answer comes from the cache, the same.
    assert overview() == before["overview"] and metering() == before["metering"]
    assert sla() == before["sla"]
    assert _usage(api) == before["usage"]
    # A member reads the usage the operator's read kept: only its tenant's.
    assert _output(_usage(member)) == {"tenant-a": 500}

    send(_event("a-late", "tenant-a", "2026-12-15T11:00:00Z", 1_000))

    assert closed_days_stamp(start=start, end=end, slugs=["p1"]) not in (None, stamp)
    after = {"overview": overview(), "metering": metering(), "sla": sla(), "usage": _usage(api)}
    member_after = _usage(member)
    assert _output(after["usage"]) == {"tenant-a": 1_500, "tenant-b": 700}
    assert _output(member_after) == {"tenant-a": 1_500}
    reads = {"overview": overview, "metering": metering, "sla": sla, "usage": lambda: _usage(api)}
    for name, read in reads.items():
        assert after[name] != before[name], name
        assert after[name] == _afresh(read), name
    assert member_after == _afresh(lambda: _usage(member))


@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_the_overviews_kept_figures_follow_the_pools_names(
    factory, api, users, session_client, now
):
    """The Overview's figures are kept as HTML under the kept overview's key and the names
    its pools table shows: a renamed pool is shown at once, as read with nothing kept."""
    staff = session_client(users["operator"])

    def overview() -> str:
        return _page(staff, f"/?{DAY}")

    before = overview()
    assert overview() == before == _afresh(overview)
    renamed = api.patch("/api/v1/pools/p1", {"name": "Renamed pool"}, format="json")
    assert renamed.status_code == 200, renamed.json()
    after = overview()
    assert "Renamed pool" in after and "Renamed pool" not in before
    assert after == _afresh(overview)
