"""Usage ingestion through the HTTP API: all or nothing, idempotent, exact."""

import gzip
import json
import threading
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from metering.domain.usage.formats import trace_events
from metering.models import EventKey, UsageEvent
from metering.services.usage.rollup import rollup_pending
from tests.metering.factories import event, make_deployment

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "samples"
pytestmark = pytest.mark.both_backends


@pytest.fixture
def ingest(users, token_client, tenant_a):
    make_deployment(aliases=["meta-llama/Llama-3.3-70B-Instruct"])
    api = token_client(users["operator"], scopes=["ingest", "read"])

    def post(items, path="/api/v1/usage/events", **kwargs):
        kwargs.setdefault("content_type", "application/json")
        body = items if isinstance(items, bytes | str) else json.dumps(items)
        return api.generic("POST", path, body, **kwargs)

    post.api = api
    return post


def test_batch_is_stored_and_reported(ingest, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = ingest([event(i) for i in range(3)])
    assert response.status_code == 200, response.json()
    assert response.json() == {"accepted": 3, "duplicates": 0}
    usage = ingest.api.get("/api/v1/usage?from=2026-03-01&to=2026-03-02").json()
    assert usage["count"] == 1
    row = usage["results"][0]
    assert row["period_start"] == "2026-03-01T00:00:00Z"
    assert (row["requests"], row["input_tokens"], row["output_tokens"], row["cached_tokens"]) == (
        3,
        303,
        153,
        30,
    )


def test_replayed_batch_counts_duplicates_and_stores_nothing_twice(ingest):
    items = [event(i) for i in range(5)]
    assert ingest(items).json() == {"accepted": 5, "duplicates": 0}
    assert ingest(items).json() == {"accepted": 0, "duplicates": 5}
    assert ingest(items + items[:2]).json() == {"accepted": 0, "duplicates": 7}
    assert UsageEvent.objects.count() == 5
    assert EventKey.objects.count() == 5


def test_same_id_with_other_payload_is_a_conflict_and_changes_nothing(ingest):
    ingest([event(1)])
    changed = event(1)
    changed["output_tokens"] = 999
    response = ingest([event(2), changed])
    assert response.status_code == 409
    assert response.json()["errors"] == [
        {
            "index": 1,
            "field": "id",
            "message": "this (source, id) is already stored with a different payload",
        }
    ]
    assert list(UsageEvent.objects.values_list("output_tokens", flat=True)) == [51]


def test_one_bad_event_among_1000_stores_nothing_and_lists_every_error(ingest):
    items = [event(i) for i in range(1000)]
    items[10]["input_tokens"] = -1
    items[500]["cached_tokens"] = 10_000
    items[700]["tenant"] = "nobody"
    items[900]["time"] = "2026-03-01 10:00"
    items[950]["output_tokens"] = "12"
    del items[999]["id"]
    response = ingest(items)
    assert response.status_code == 400
    errors = {(e["index"], e["field"]) for e in response.json()["errors"]}
    assert errors == {
        (10, "input_tokens"),
        (500, "cached_tokens"),
        (900, "time"),
        (950, "output_tokens"),
        (999, "id"),
    }
    assert UsageEvent.objects.count() == 0


def test_unknown_tenant_model_and_pool_are_named(ingest):
    response = ingest(
        [
            event(1, tenant="ghost"),
            event(2, model="gpt-9"),
            event(3, pool="nowhere"),
        ]
    )
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"index": 0, "field": "tenant", "message": "unknown tenant 'ghost'"},
        {"index": 1, "field": "model", "message": "unknown model 'gpt-9'"},
        {
            "index": 2,
            "field": "pool",
            "message": "model 'llama-70b' has no deployment on pool 'nowhere'",
        },
    ]
    assert EventKey.objects.count() == 0


def test_gzip_body_is_accepted_and_too_many_events_get_413(ingest):
    body = gzip.compress(json.dumps([event(i) for i in range(4)]).encode())
    response = ingest(body, HTTP_CONTENT_ENCODING="gzip")
    assert response.json() == {"accepted": 4, "duplicates": 0}
    response = ingest([event(i) for i in range(10_001)])
    assert response.status_code == 413


def test_wrong_content_type_and_malformed_json_are_4xx(ingest):
    assert ingest("[]", content_type="text/plain").status_code == 415
    response = ingest("[{", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["message"]


def test_read_token_cannot_ingest(users, token_client, tenant_a):
    make_deployment()
    api = token_client(users["operator"], scopes=["read"])
    response = api.post("/api/v1/usage/events", [event(1)], format="json")
    assert response.status_code == 403


def test_openai_batch_sample_is_ingested_through_aliases(ingest, tenant_a):
    make_deployment(model="gpt-4o-mini", pool="h200-a", aliases=["gpt-4o-mini-2024-07-18"])
    body = (SAMPLES / "openai_batch_output_gpt-4o-mini.jsonl").read_bytes()
    response = ingest(
        body, path="/api/v1/usage/openai-batch?tenant=tenant-a", content_type="application/jsonl"
    )
    assert response.json() == {"accepted": 2, "duplicates": 0}
    rows = UsageEvent.objects.order_by("time").values_list("input_tokens", "output_tokens")
    assert list(rows) == [(20, 10), (22, 10)]


def test_cloudevents_quickstart_sample_is_rejected_naming_the_fields(ingest):
    sample = json.loads((SAMPLES / "openmeter_cloudevent_quickstart.json").read_text())
    response = ingest(
        [sample],
        path="/api/v1/usage/cloudevents",
        content_type="application/cloudevents-batch+json",
    )
    assert response.status_code == 400
    fields = {e["field"] for e in response.json()["errors"]}
    assert {"time", "input_tokens", "output_tokens"} <= fields


def test_capacity_samples_upsert_and_validate(users, token_client):
    make_deployment()
    api = token_client(users["operator"], scopes=["ingest"])
    sample = {
        "pool": "h100-a",
        "time": "2026-03-01T00:00:00Z",
        "gpus_installed": 8,
        "gpus_healthy": 8,
        "gpus_busy": 4,
    }
    assert api.post("/api/v1/capacity", [sample], format="json").json() == {
        "created": 1,
        "replaced": 0,
    }
    sample["gpus_busy"] = 6
    assert api.post("/api/v1/capacity", [sample], format="json").json() == {
        "created": 0,
        "replaced": 1,
    }
    bad = {**sample, "gpus_busy": 9}
    response = api.post("/api/v1/capacity", [sample, bad], format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"index": 1, "field": "gpus_busy", "message": "must not exceed gpus_healthy"}
    ]


TRACES = [
    # file, from, to, [(hour, requests, input, output)]
    (
        "azure_llm_2023_code.csv",
        "2023-11-16T00:00:00Z",
        "2023-11-17T00:00:00Z",
        [
            ("2023-11-16T18:00:00Z", 7717, 15_710_990, 213_958),
            ("2023-11-16T19:00:00Z", 1102, 2_348_984, 31_938),
        ],
    ),
    (
        "burstgpt_1_first400_via_gitm.csv",
        "2026-01-01T00:00:00Z",
        "2026-01-02T00:00:00Z",
        [
            ("2026-01-01T00:00:00Z", 38, 27_375, 13_202),
            ("2026-01-01T09:00:00Z", 161, 75_809, 43_461),
        ],
    ),
]


@pytest.mark.parametrize(("name", "start", "end", "hours"), TRACES)
def test_replayed_trace_gives_the_readme_sums_through_the_usage_api(
    ingest, name, start, end, hours
):
    items = list(trace_events(path=SAMPLES / "traces" / name, tenant="tenant-a", model="llama-70b"))
    for chunk in range(0, len(items), 5000):
        response = ingest(items[chunk : chunk + 5000])
        assert response.status_code == 200, response.json()
    rollup_pending()
    hourly = ingest.api.get(f"/api/v1/usage?from={start}&to={end}&granularity=hour&page_size=1000")
    by_hour = {r["period_start"]: r for r in hourly.json()["results"]}
    for hour, requests, input_tokens, output_tokens in hours:
        row = by_hour[hour]
        assert (row["requests"], row["input_tokens"], row["output_tokens"]) == (
            requests,
            input_tokens,
            output_tokens,
        )
    daily = ingest.api.get(f"/api/v1/usage?from={start}&to={end}").json()["results"]
    assert sum(r["requests"] for r in daily) == len(items)
    assert sum(r["input_tokens"] for r in daily) == sum(i["input_tokens"] for i in items)
    assert sum(r["output_tokens"] for r in daily) == sum(i["output_tokens"] for i in items)
    assert sum(r["errors"] for r in daily) == sum(i.get("status") == "error" for i in items)
    # A full replay is all duplicates.
    assert ingest(items[:5000]).json() == {"accepted": 0, "duplicates": min(5000, len(items))}


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_identical_batches_at_the_same_moment_store_each_event_once(users, tenant_a):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("concurrency guarantees are PostgreSQL's")
    from portal.services import token_create

    make_deployment()
    _, raw = token_create(user=users["operator"], name="t", scopes=["ingest"])
    items = [event(i) for i in range(2000)]
    results = []
    barrier = threading.Barrier(2)

    def send():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        barrier.wait()
        results.append(client.post("/api/v1/usage/events", items, format="json").json())
        from django.db import connections

        connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r["accepted"] for r in results) == [0, 2000]
    assert sorted(r["duplicates"] for r in results) == [0, 2000]
    assert UsageEvent.objects.count() == 2000
