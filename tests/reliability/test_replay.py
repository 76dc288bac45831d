"""Ingestion replay at scale: 10,000 events sent three times, the first time by 16 clients
racing on the same fresh events, stored once with identical totals.

tests/metering/test_usage_ingest_api.py covers a 5-event replay, one conflicting event and two
concurrent 2,000-event batches; this adds the scale, 16 concurrent clients, three passes
with different batch boundaries (gzip on the last), the totals through the usage API, and
a conflict inside a large batch that also carries new events (all-or-nothing).
"""

import gzip
import json
import random
from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Count, Sum
from rest_framework.test import APIClient

from metering.models import EventKey, UsageEvent
from metering.services.usage.rollup import usage_fold
from tests.concurrency import run_together
from tests.metering.factories import make_deployment
from tests.reliability.world import bearer, world_build

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

EVENTS = 10_000
CLIENTS = 16
BATCH = 1_000
MARCH = datetime(2026, 3, 1, tzinfo=UTC)


def _events() -> list[dict]:
    rng = random.Random(7)
    return [
        {
            "id": f"replay-{i}",
            "time": (MARCH + timedelta(seconds=rng.randrange(28 * 86400))).isoformat(),
            "tenant": ("tenant-a", "tenant-b")[i % 2],
            "model": "llama-70b",
            "pool": ("h100-a", "h100-b")[i % 3 % 2],
            "input_tokens": rng.randrange(1, 100_000),
            "cached_tokens": 0,
            "output_tokens": rng.randrange(0, 10_000),
            "status": "error" if i % 97 == 0 else "ok",
        }
        for i in range(EVENTS)
    ]


def _post(raw: str, batch: list[dict], *, gzipped: bool = False):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    body = json.dumps(batch).encode()
    extra = {}
    if gzipped:
        body, extra = gzip.compress(body), {"HTTP_CONTENT_ENCODING": "gzip"}
    return client.generic(
        "POST", "/api/v1/usage/events", body, content_type="application/json", **extra
    )


def _concurrently(raw: str, plan: list[list[list[dict]]], **kwargs) -> list:
    """Each of len(plan) clients posts its batches in order, all starting together."""
    per_client, failures = run_together(
        lambda batches: [_post(raw, batch, **kwargs) for batch in batches], plan
    )
    assert not failures, failures
    return [response for responses in per_client for response in responses]


def _stored() -> dict:
    return UsageEvent.objects.aggregate(
        rows=Count("id"),
        input=Sum("input_tokens"),
        output=Sum("output_tokens"),
        cached=Sum("cached_tokens"),
    )


def _usage_api_totals(raw: str) -> dict:
    """Totals of March through GET /api/v1/usage, from the daily and from the hourly rollups
    (after folding the queue); they must agree."""
    usage_fold()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    keys = ("requests", "errors", "input_tokens", "output_tokens")
    totals = {}
    for granularity, query in (("day", ""), ("hour", "&granularity=hour")):
        rows, url = [], f"/api/v1/usage?from=2026-03-01&to=2026-04-01&page_size=1000{query}"
        while url:
            page = client.get(url).json()
            rows += page["results"]
            url = page["next"]
        totals[granularity] = {key: sum(row[key] for row in rows) for key in keys}
    assert totals["day"] == totals["hour"], f"daily rollups disagree with hourly: {totals}"
    return totals["day"]


def _assert_all(responses, *, accepted: int, duplicates: int) -> None:
    refused = [(r.status_code, r.content[:300]) for r in responses if r.status_code != 200]
    assert refused == [], refused[:3]
    assert sum(r.json()["accepted"] for r in responses) == accepted
    assert sum(r.json()["duplicates"] for r in responses) == duplicates


def test_10000_events_replayed_three_times_are_stored_once_with_identical_totals():
    world = world_build()
    make_deployment(pool="h100-b")
    raw = bearer(world.users["operator"], ["ingest", "read"])
    baseline = UsageEvent.objects.count()
    events = _events()
    expected = {
        "rows": baseline + EVENTS,
        "input": sum(e["input_tokens"] for e in events) + _stored()["input"],
        "output": sum(e["output_tokens"] for e in events) + _stored()["output"],
        "cached": _stored()["cached"],
    }
    batches = [events[i : i + BATCH] for i in range(0, EVENTS, BATCH)]

    # 1. Sixteen clients race on the fresh events: each batch is sent by several at once.
    plan = [[batches[(c + k) % len(batches)] for k in (0, 3, 6)] for c in range(CLIENTS)]
    first = _concurrently(raw, plan)
    _assert_all(first, accepted=EVENTS, duplicates=len(plan) * 3 * BATCH - EVENTS)
    assert _stored() == expected
    assert EventKey.objects.filter(event_id__startswith="replay-").count() == EVENTS
    totals = _usage_api_totals(raw)
    assert totals["requests"] == baseline + EVENTS
    assert totals["errors"] == sum(e["status"] == "error" for e in events)

    # 2. The same batches again, one after another: all duplicates, answered 200.
    second = [_post(raw, batch) for batch in batches]
    _assert_all(second, accepted=0, duplicates=EVENTS)
    assert _stored() == expected
    assert _usage_api_totals(raw) == totals

    # 3. Other boundaries, reversed, gzipped, from the sixteen clients again.
    shuffled = list(reversed(events))
    slices = [shuffled[c::CLIENTS] for c in range(CLIENTS)]
    third = _concurrently(raw, [[s] for s in slices], gzipped=True)
    _assert_all(third, accepted=0, duplicates=EVENTS)
    assert _stored() == expected
    assert _usage_api_totals(raw) == totals


def test_conflicts_inside_a_large_batch_are_listed_and_nothing_of_it_is_stored():
    world = world_build()
    make_deployment(pool="h100-b")
    raw = bearer(world.users["operator"], ["ingest"])
    events = _events()[:2_000]
    assert _post(raw, events).json() == {"accepted": 2_000, "duplicates": 0}
    before = list(UsageEvent.objects.order_by("id").values())
    replay = [dict(e) for e in events[:997]]
    changed = {10: "output_tokens", 500: "input_tokens", 996: "time"}
    for index, field in changed.items():
        replay[index][field] = (
            "2026-03-29T00:00:00Z" if field == "time" else replay[index][field] + 1
        )
    fresh = [{**events[0], "id": f"fresh-{i}"} for i in range(3)]
    response = _post(raw, replay + fresh)
    assert response.status_code == 409
    assert [(e["index"], e["field"]) for e in response.json()["errors"]] == [
        (index, "id") for index in sorted(changed)
    ]
    assert list(UsageEvent.objects.order_by("id").values()) == before
    assert not EventKey.objects.filter(event_id__startswith="fresh-").exists()
