"""Usage ingestion through the HTTP API: all or nothing, idempotent, exact."""

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from metering.domain.usage.fields import BAD_SLUG
from metering.domain.usage.formats import trace_events
from metering.models import CapacitySample, EventKey, FoldPending, SourceSeen, UsageEvent
from metering.services.usage.rollup import usage_fold
from portal.models import AuditEntry, Project
from portal.projects import MAX_PROJECTS
from portal.services import token_create
from tests.concurrency import run_together
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


def test_events_stored_by_an_earlier_release_stay_duplicates_when_replayed(ingest):
    # Their keys as the release before the faster fast path and hash stored them (the
    # hashes pinned from it): an offset time with milliseconds, integer and float latencies,
    # a source, requests, a token class and a tier.
    plain = event(1)
    rich = event(
        2, time="2026-03-01T11:15:00.250+01:00", ttft_ms=310, tpot_ms=28.5,
        latency_ms=1200.25, source="gw-1", requests=3, reasoning_tokens=7,
        service_tier="priority",
    )  # fmt: skip
    stored_at = datetime(2026, 3, 1, 10, 16, tzinfo=UTC)
    EventKey.objects.bulk_create(
        [
            EventKey(source="default", event_id="ev-1", received_at=stored_at,
                     payload_hash="90e895f1fd516daeb51f35c1aa3654e2"),
            EventKey(source="gw-1", event_id="ev-2", received_at=stored_at,
                     payload_hash="76504b2249b99d37d60a1203fe793f20"),
        ]
    )  # fmt: skip

    assert ingest([plain, rich]).json() == {"accepted": 0, "duplicates": 2}
    changed = ingest([plain, {**rich, "tpot_ms": 28.25}])
    assert changed.status_code == 409
    assert [(e["index"], e["field"]) for e in changed.json()["errors"]] == [(1, "id")]
    assert UsageEvent.objects.count() == 0
    assert EventKey.objects.count() == 2


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
        (700, "tenant"),  # an unknown tenant is named in the same answer as the field errors
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


def test_wrong_content_type_is_a_415_naming_what_each_operation_reads(ingest):
    plain = ingest("[]", content_type="text/plain; charset=utf-8")
    none = ingest("[]", content_type="")
    cloud = ingest("[]", path="/api/v1/usage/cloudevents", content_type="text/csv")

    assert (plain.status_code, none.status_code, cloud.status_code) == (415, 415, 415)
    assert plain.json()["errors"] == [
        {"field": "Content-Type", "message": "must be one of application/json (got 'text/plain')"}
    ]
    assert none.json()["errors"] == [
        {"field": "Content-Type", "message": "must be one of application/json (got 'none')"}
    ]
    assert cloud.json()["errors"] == [
        {
            "field": "Content-Type",
            "message": "must be one of application/cloudevents-batch+json, application/json "
            "(got 'text/csv')",
        }
    ]


def test_wrong_content_type_and_malformed_json_are_4xx(ingest):
    assert ingest("[]", content_type="text/plain").status_code == 415
    response = ingest("[{", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["message"]


def test_read_token_cannot_ingest(users, token_client, tenant_a):
    make_deployment()
    api = token_client(users["operator"], scopes=["read"])
    response = api.post("/api/v1/usage/events", [event(1)])
    assert response.status_code == 403


@pytest.mark.parametrize("now", [datetime(2024, 12, 31, tzinfo=UTC)], indirect=True)  # the sample's
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
    assert api.post("/api/v1/capacity", [sample]).json() == {
        "created": 1,
        "replaced": 0,
    }
    sample["gpus_busy"] = 6
    assert api.post("/api/v1/capacity", [sample]).json() == {
        "created": 0,
        "replaced": 1,
    }
    bad = {**sample, "gpus_busy": 9}
    response = api.post("/api/v1/capacity", [sample, bad])
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"index": 1, "field": "gpus_busy", "message": "must not exceed gpus_healthy"}
    ]


TRACES = [
    # file, from, to, [(hour, requests, input, output)], a clock within 13 months after it
    (
        "azure_llm_2023_code.csv",
        "2023-11-16T00:00:00Z",
        "2023-11-17T00:00:00Z",
        [
            ("2023-11-16T18:00:00Z", 7717, 15_710_990, 213_958),
            ("2023-11-16T19:00:00Z", 1102, 2_348_984, 31_938),
        ],
        datetime(2023, 12, 1, tzinfo=UTC),
    ),
    (
        "burstgpt_1_first400_via_gitm.csv",
        "2026-01-01T00:00:00Z",
        "2026-01-02T00:00:00Z",
        [
            ("2026-01-01T00:00:00Z", 38, 27_375, 13_202),
            ("2026-01-01T09:00:00Z", 161, 75_809, 43_461),
        ],
        datetime(2026, 12, 16, 10, tzinfo=UTC),  # relative traces start on 2026-01-01
    ),
]


@pytest.mark.parametrize(("name", "start", "end", "hours", "now"), TRACES, indirect=["now"])
def test_replayed_trace_gives_the_readme_sums_through_the_usage_api(
    ingest, name, start, end, hours, now
):
    items = list(trace_events(path=SAMPLES / "traces" / name, tenant="tenant-a", model="llama-70b"))
    for chunk in range(0, len(items), 5000):
        response = ingest(items[chunk : chunk + 5000])
        assert response.status_code == 200, response.json()
    usage_fold()
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

    def send(client):
        return client.post("/api/v1/usage/events", items).json()

    clients = [APIClient() for _ in range(2)]
    for client in clients:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    results, errors = run_together(send, clients)
    assert errors == []
    assert sorted(r["accepted"] for r in results) == [0, 2000]
    assert sorted(r["duplicates"] for r in results) == [0, 2000]
    assert UsageEvent.objects.count() == 2000


# --- refusals that name their field (issue #19) -----------------------------------------------

# The default test clock is 2026-12-16T10:00Z: the retention window starts on 2025-11-01.
OLD = (
    "is older than the retention window "
    "(the start of the UTC month 13 months ago, 2025-11-01T00:00:00Z)"
)
FUTURE = "is more than 5 minutes in the future"
CE = "application/cloudevents-batch+json"


def _cloudevent(i, **data):
    item = event(i, **data)
    return {
        "specversion": "1.0",
        "type": "token.usage",
        "source": "gateway",
        "id": item.pop("id"),
        "time": item.pop("time"),
        "data": item,
    }


def _openai_line(i, *, created, prompt_tokens="20"):
    """One line of OpenAI Batch output; `created` and `prompt_tokens` are JSON literals."""
    usage = f'{{"prompt_tokens": {prompt_tokens}, "completion_tokens": 10, "total_tokens": 30}}'
    body = f'{{"created": {created}, "model": "llama-70b", "usage": {usage}}}'
    response = f'{{"status_code": 200, "request_id": "q", "body": {body}}}'
    return (
        f'{{"id": "batch_req_{i}", "custom_id": "r{i}", "error": null, "response": {response}}}\n'
    )


def _stored_nothing():
    return (UsageEvent.objects.count(), EventKey.objects.count()) == (0, 0)


@pytest.mark.parametrize(
    ("time", "message"),
    [
        ("2025-10-31T23:59:59Z", OLD),
        ("1900-01-01T00:00:00Z", OLD),
        ("0999-12-31T00:00:00Z", OLD),
        ("2026-12-16T10:05:01Z", FUTURE),
        ("9999-12-31T23:59:59Z", FUTURE),
    ],
)
def test_event_outside_the_window_is_refused_naming_time_in_every_format(ingest, time, message):
    seconds = int(datetime.fromisoformat(time).timestamp())
    # Batch output dates lines in Unix seconds: one before 1970 is refused as such, so those
    # take created 0 (1970-01-01), older than the window too.
    created, line_message = (seconds, message) if seconds >= 0 else (0, OLD)
    events = ingest([event(1), event(2, time=time)])
    cloudevents = ingest(
        [_cloudevent(1), _cloudevent(2, time=time)],
        path="/api/v1/usage/cloudevents",
        content_type=CE,
    )
    openai = ingest(
        _openai_line(1, created=1_796_000_000) + _openai_line(2, created=created),
        path="/api/v1/usage/openai-batch?tenant=tenant-a",
        content_type="application/jsonl",
    )

    for response, field, expected in (
        (events, "time", message),
        (cloudevents, "time", message),
        (openai, "response.body.created", line_message),  # where the line dates itself
    ):
        assert response.status_code == 400, response.content
        assert response.json()["errors"] == [{"index": 1, "field": field, "message": expected}]
    assert _stored_nothing()


def test_event_on_the_first_instant_of_the_window_is_stored(ingest):
    response = ingest(
        [event(1, time="2025-11-01T00:00:00Z"), event(2, time="2026-12-16T10:05:00Z")]
    )

    assert response.json() == {"accepted": 2, "duplicates": 0}
    assert sorted(UsageEvent.objects.values_list("time", flat=True)) == [
        datetime(2025, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 16, 10, 5, tzinfo=UTC),
    ]


@pytest.mark.postgres_only
def test_a_month_whose_partition_went_since_this_process_saw_it_is_stored(ingest):
    """The month's partition is looked up once a process: when it is gone since (its month
    archived in another process, a rolled-back transaction), the insert fails and the second
    pass makes it again; nothing of the first pass is kept."""
    from django.db import connection

    assert ingest([event(1)]).json() == {"accepted": 1, "duplicates": 0}
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE metering_usageevent_p202603")  # its event with it
    assert ingest([event(2), event(3)]).json() == {"accepted": 2, "duplicates": 0}
    assert "metering_usageevent_p202603" in _usage_partitions()
    assert sorted(UsageEvent.objects.values_list("input_tokens", flat=True)) == [102, 103]


def _usage_partitions() -> list[str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'metering_usageevent' "
            "ORDER BY 1"
        )
        return [name for (name,) in cursor.fetchall()]


@pytest.mark.postgres_only
def test_batch_dated_1900_to_1904_is_refused_whole_and_creates_no_partition(ingest):
    before = _usage_partitions()
    items = [event(0)] + [event(y, time=f"{y}-06-01T00:00:00Z") for y in range(1900, 1905)]

    response = ingest(items)

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"index": i, "field": "time", "message": OLD} for i in range(1, 6)
    ]
    assert _usage_partitions() == before
    assert not [name for name in before if name.startswith("metering_usageevent_p19")]
    assert _stored_nothing()


CAPACITY = {"pool": "h100-a", "gpus_installed": 8, "gpus_healthy": 8, "gpus_busy": 4}
YEARS = "must be within the years 2000–2100"


@pytest.mark.parametrize(
    ("time", "message"),
    [
        ("9999-12-31T00:00:00Z", YEARS),  # as every timestamp the API reads
        ("2026-12-16T10:05:01Z", FUTURE),
        ("0999-12-31T00:00:00Z", YEARS),
        ("2025-10-31T23:59:59Z", OLD),
    ],
)
def test_capacity_sample_outside_the_window_is_refused_naming_time(
    users, token_client, time, message
):
    make_deployment()
    api = token_client(users["operator"], scopes=["ingest"])
    samples = [{**CAPACITY, "time": "2026-12-01T00:00:00Z"}, {**CAPACITY, "time": time}]

    response = api.post("/api/v1/capacity", samples)

    assert response.status_code == 400
    assert response.json()["errors"] == [{"index": 1, "field": "time", "message": message}]
    assert not CapacitySample.objects.exists()


def test_capacity_samples_in_a_closed_month_are_refused_naming_time(users, token_client):
    """kpis.md, Closed months: a capacity sample timed in one would change its figures."""
    from datetime import UTC, datetime

    from portal.closing import month_close

    make_deployment()
    month_close(month=datetime(2026, 11, 1, tzinfo=UTC))
    api = token_client(users["operator"], scopes=["ingest"])
    samples = [
        {**CAPACITY, "time": "2026-12-01T00:00:00Z"},
        {**CAPACITY, "time": "2026-11-01T00:00:00Z"},
        {**CAPACITY, "time": "2026-11-30T23:45:00Z"},
    ]

    response = api.post("/api/v1/capacity", samples)

    assert response.status_code == 400
    message = "2026-11 is closed: nothing may take effect inside it"
    assert response.json()["errors"] == [
        {"index": 1, "field": "time", "message": message},
        {"index": 2, "field": "time", "message": message},
    ]
    assert not CapacitySample.objects.exists()
    assert api.post("/api/v1/capacity", samples[:1]).json() == {"created": 1, "replaced": 0}


def test_capacity_samples_on_the_window_bounds_are_stored(users, token_client):
    make_deployment()
    api = token_client(users["operator"], scopes=["ingest"])
    samples = [
        {**CAPACITY, "time": "2025-11-01T00:00:00Z"},
        {**CAPACITY, "time": "2026-12-16T10:05:00Z"},
    ]

    response = api.post("/api/v1/capacity", samples)

    assert response.json() == {"created": 2, "replaced": 0}


def test_capacity_batch_names_every_error_in_one_answer(users, token_client):
    make_deployment()
    api = token_client(users["operator"], scopes=["ingest"])
    bad = {**CAPACITY, "pool": "nowhere", "time": "2026-12-16T10:05:01Z", "gpus_busy": -1}

    response = api.post("/api/v1/capacity", [bad])

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"index": 0, "field": "pool", "message": "Object with slug=nowhere does not exist."},
        {"index": 0, "field": "time", "message": FUTURE},
        {
            "index": 0,
            "field": "gpus_busy",
            "message": "Ensure this value is greater than or equal to 0.",
        },
    ]
    assert not CapacitySample.objects.exists()


def test_field_errors_and_unknown_references_come_in_one_answer(ingest):
    items = [
        event(0, input_tokens=-1),
        event(1, tenant="ghost"),
        event(2, model="gpt-9"),
        event(3, pool="nowhere"),
        event(4, tenant="ghost", output_tokens="5"),
        event(5, tenant="bad slug!", model="gpt-9"),
        event(6, pool="bad pool!", model="gpt-9"),
    ]

    response = ingest(items)

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"index": 0, "field": "input_tokens", "message": "must be a non-negative integer"},
        {"index": 1, "field": "tenant", "message": "unknown tenant 'ghost'"},
        {"index": 2, "field": "model", "message": "unknown model 'gpt-9'"},
        {
            "index": 3,
            "field": "pool",
            "message": "model 'llama-70b' has no deployment on pool 'nowhere'",
        },
        {"index": 4, "field": "output_tokens", "message": "must be a non-negative integer"},
        {"index": 4, "field": "tenant", "message": "unknown tenant 'ghost'"},
        {"index": 5, "field": "tenant", "message": BAD_SLUG},
        {"index": 5, "field": "model", "message": "unknown model 'gpt-9'"},
        {"index": 6, "field": "pool", "message": BAD_SLUG},
        {"index": 6, "field": "model", "message": "unknown model 'gpt-9'"},
    ]
    assert _stored_nothing()


def test_cloudevents_and_openai_batch_name_unknown_references_with_field_errors(ingest):
    cloudevents = ingest(
        [_cloudevent(0, tenant="ghost"), _cloudevent(1, input_tokens=-1)],
        path="/api/v1/usage/cloudevents",
        content_type=CE,
    )
    openai = ingest(
        _openai_line(0, created=1_796_000_000)
        + _openai_line(1, created=1_796_000_000, prompt_tokens="-1"),
        path="/api/v1/usage/openai-batch?tenant=ghost",
        content_type="application/jsonl",
    )

    assert cloudevents.json()["errors"] == [
        {"index": 0, "field": "tenant", "message": "unknown tenant 'ghost'"},
        {"index": 1, "field": "input_tokens", "message": "must be a non-negative integer"},
    ]
    assert openai.json()["errors"] == [  # named as the file names them
        {"index": 0, "field": "tenant", "message": "unknown tenant 'ghost'"},
        {
            "index": 1,
            "field": "response.body.usage.prompt_tokens",
            "message": "must be a non-negative integer",
        },
        {"index": 1, "field": "tenant", "message": "unknown tenant 'ghost'"},
    ]
    assert _stored_nothing()


def test_payload_conflicts_come_with_field_and_reference_errors_in_one_answer(ingest):
    """A stored event sent again changed, beside a bad count and an unknown model: one 400
    lists all three, the conflict named on `id`; nothing more is stored."""
    conflict = "this (source, id) is already stored with a different payload"
    assert ingest([event(0), event(1)]).status_code == 200
    events = ingest([event(0, output_tokens=999), event(2, input_tokens=-1), event(3, model="x")])
    openai = ingest(
        _openai_line(0, created=1_796_000_000)
        + _openai_line(0, created=1_796_000_000, prompt_tokens="21")  # the same id, changed
        + _openai_line(2, created=1_796_000_000, prompt_tokens="-1"),
        path="/api/v1/usage/openai-batch?tenant=tenant-a",
        content_type="application/jsonl",
    )
    references = ingest([event(1, output_tokens=7), event(4, tenant="ghost")])  # fast path

    assert events.status_code == 400
    assert events.json()["errors"] == [
        {"index": 0, "field": "id", "message": conflict},
        {"index": 1, "field": "input_tokens", "message": "must be a non-negative integer"},
        {"index": 2, "field": "model", "message": "unknown model 'x'"},
    ]
    assert openai.json()["errors"] == [
        {"index": 1, "field": "id", "message": conflict},
        {
            "index": 2,
            "field": "response.body.usage.prompt_tokens",
            "message": "must be a non-negative integer",
        },
    ]
    assert references.json()["errors"] == [
        {"index": 0, "field": "id", "message": conflict},
        {"index": 1, "field": "tenant", "message": "unknown tenant 'ghost'"},
    ]
    assert (UsageEvent.objects.count(), EventKey.objects.count()) == (2, 2)


def test_null_cached_tokens_is_refused_naming_it(ingest):
    message = "must be a non-negative integer, not null (leave it out for 0)"
    events = ingest([event(1, cached_tokens=None)])
    cloudevents = ingest(
        [_cloudevent(1, cached_tokens=None)], path="/api/v1/usage/cloudevents", content_type=CE
    )

    for response in (events, cloudevents):
        assert response.status_code == 400
        assert response.json()["errors"] == [
            {"index": 0, "field": "cached_tokens", "message": message}
        ]
    assert _stored_nothing()


@pytest.mark.parametrize("field", ["input_tokens", "cached_tokens", "output_tokens"])
def test_token_count_1e309_is_refused_naming_the_field(ingest, field):
    events = ingest(_with_number([event(1)], field, "1e309"))
    cloudevents = ingest(
        _with_number([_cloudevent(1)], field, "1e309"),
        path="/api/v1/usage/cloudevents",
        content_type=CE,
    )

    for response in (events, cloudevents):
        assert response.status_code == 400
        assert response.json()["errors"] == [
            {"index": 0, "field": field, "message": "must be a non-negative integer"}
        ]
    assert _stored_nothing()


def _with_number(items, field, number):
    """The JSON of `items` with the first `field` set to the literal `number`."""
    text = json.dumps(items)
    start = text.index(f'"{field}": ') + len(f'"{field}": ')
    end = start + len(text[start:]) - len(text[start:].lstrip("0123456789"))
    return text[:start] + number + text[end:]


def test_openai_batch_prompt_tokens_1e309_is_refused_naming_the_field(ingest):
    response = ingest(
        _openai_line(0, created=1_796_000_000, prompt_tokens="1e309"),
        path="/api/v1/usage/openai-batch?tenant=tenant-a",
        content_type="application/jsonl",
    )

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "index": 0,
            "field": "response.body.usage.prompt_tokens",
            "message": "must be a non-negative integer",
        }
    ]
    assert _stored_nothing()


def test_capacity_count_1e309_and_nul_in_the_pool_name_their_field(users, token_client):
    make_deployment()
    api = token_client(users["operator"], scopes=["ingest"])
    sample = {**CAPACITY, "time": "2026-12-01T00:00:00Z"}
    huge = _with_number([sample], "gpus_installed", "1e309")
    nul = json.dumps([{**sample, "pool": "h100\x00a"}])

    huge_response = api.generic("POST", "/api/v1/capacity", huge, content_type="application/json")
    nul_response = api.generic("POST", "/api/v1/capacity", nul, content_type="application/json")

    assert huge_response.status_code == 400
    assert huge_response.json()["errors"] == [
        {"index": 0, "field": "gpus_installed", "message": "A valid integer is required."}
    ]
    assert nul_response.status_code == 400
    assert nul_response.json()["errors"] == [
        {"index": 0, "field": "pool", "message": "must not contain NUL (U+0000) characters"}
    ]
    assert not CapacitySample.objects.exists()


def test_nul_in_a_slug_is_refused_naming_the_field(ingest):
    events = ingest([event(1, tenant="tenant\x00a"), event(2, pool="h100\x00a")])
    openai = ingest(
        _openai_line(0, created=1_796_000_000),
        path="/api/v1/usage/openai-batch?tenant=tenant%00a",
        content_type="application/jsonl",
    )

    assert events.status_code == 400
    assert events.json()["errors"] == [
        {"index": 0, "field": "tenant", "message": BAD_SLUG},
        {"index": 1, "field": "pool", "message": BAD_SLUG},
    ]
    assert openai.json()["errors"] == [{"index": 0, "field": "tenant", "message": BAD_SLUG}]
    assert _stored_nothing()


# --- token classes: parts of the counts, counted once on every path ---------------------

# The anchors' double-count cases (kpis.md section 3, data-formats.md sections 4 and 5):
# cached inside input; reasoning inside output; an Anthropic-style count (input 200
# excluding cache reads 500 and writes 300) that a gateway normalised to input 1000.
CLASS_CASES = [
    {"input_tokens": 1000, "cached_tokens": 600, "output_tokens": 100},
    {"input_tokens": 200, "output_tokens": 500, "reasoning_tokens": 300},
    {"input_tokens": 1000, "cached_tokens": 500, "cache_write_tokens": 300, "output_tokens": 100},
]
CLASS_TOTALS = {
    "requests": 3,
    "input_tokens": 2200,
    "cached_tokens": 1100,
    "cache_write_tokens": 300,
    "output_tokens": 700,
    "reasoning_tokens": 300,
}
CLASS_TIME = 1772360100  # 2026-03-01T10:15:00Z


def _class_events(cases):
    return [{**event(i), "cached_tokens": 0, **case} for i, case in enumerate(cases)], {}


def _class_cloudevents(cases):
    return [_cloudevent(i, **{"cached_tokens": 0, **case}) for i, case in enumerate(cases)], {
        "path": "/api/v1/usage/cloudevents",
        "content_type": CE,
    }


def _class_openai_batch(cases):
    lines = []
    for i, case in enumerate(cases):
        usage = {
            "prompt_tokens": case["input_tokens"],
            "completion_tokens": case["output_tokens"],
            "total_tokens": case["input_tokens"] + case["output_tokens"],
            "prompt_tokens_details": {
                "cached_tokens": case.get("cached_tokens", 0),
                "cache_write_tokens": case.get("cache_write_tokens", 0),
            },
            "completion_tokens_details": {"reasoning_tokens": case.get("reasoning_tokens", 0)},
        }
        body = {"created": CLASS_TIME, "model": "llama-70b", "usage": usage}
        response = {"status_code": 200, "request_id": f"q{i}", "body": body}
        line = {"id": f"batch_req_{i}", "custom_id": f"r{i}", "error": None, "response": response}
        lines.append(json.dumps(line))
    return "\n".join(lines), {
        "path": "/api/v1/usage/openai-batch?tenant=tenant-a",
        "content_type": "application/jsonl",
    }


@pytest.mark.parametrize("encode", [_class_events, _class_cloudevents, _class_openai_batch])
def test_token_classes_are_counted_once_on_every_path_and_replays_are_duplicates(ingest, encode):
    body, where = encode(CLASS_CASES)

    assert ingest(body, **where).json() == {"accepted": 3, "duplicates": 0}
    assert ingest(body, **where).json() == {"accepted": 0, "duplicates": 3}
    usage_fold()

    [row] = ingest.api.get("/api/v1/usage?from=2026-03-01&to=2026-03-02").json()["results"]
    assert {name: row[name] for name in CLASS_TOTALS} == CLASS_TOTALS
    stored = UsageEvent.objects.values_list(
        "input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens"
    )
    assert sorted(stored) == sorted(
        tuple(case.get(name, 0) for name in list(CLASS_TOTALS)[1:]) for case in CLASS_CASES
    )


@pytest.mark.parametrize("encode", [_class_events, _class_cloudevents, _class_openai_batch])
def test_a_replay_adding_classes_to_a_stored_event_is_a_duplicate_and_changes_nothing(
    ingest, encode
):
    """An event stored without classes (an older version ignored reasoning tokens) replayed
    with them: a duplicate, the stored event unchanged; another count still conflicts."""
    plain = [{k: v for k, v in case.items() if not k.startswith(("reasoning", "cache_w"))}
             for case in CLASS_CASES]  # fmt: skip
    body, where = encode(plain)
    assert ingest(body, **where).json() == {"accepted": 3, "duplicates": 0}

    body, where = encode(CLASS_CASES)
    assert ingest(body, **where).json() == {"accepted": 0, "duplicates": 3}
    assert UsageEvent.objects.filter(reasoning_tokens=0, cache_write_tokens=0).count() == 3

    body, where = encode([CLASS_CASES[0], {**CLASS_CASES[1], "output_tokens": 501}])
    response = ingest(body, **where)
    assert response.status_code == 409
    assert [e["index"] for e in response.json()["errors"]] == [1]


def test_an_event_repeated_in_its_batch_with_classes_added_is_stored_as_first_sent(ingest):
    """Within one batch as across batches: the first copy is stored, a later one that only
    adds token classes is its duplicate. So a later replay of either copy is a duplicate
    (storing the later copy would make the first one's replay a conflict)."""
    plain = {**event(1), "cached_tokens": 0, "input_tokens": 200, "output_tokens": 500}
    classes = {**plain, "reasoning_tokens": 300}

    assert ingest([plain, classes]).json() == {"accepted": 1, "duplicates": 1}
    assert list(UsageEvent.objects.values_list("reasoning_tokens", flat=True)) == [0]
    assert ingest([plain]).json() == {"accepted": 0, "duplicates": 1}
    assert ingest([classes]).json() == {"accepted": 0, "duplicates": 1}


@pytest.mark.parametrize(
    ("case", "field", "message"),
    [
        ({"reasoning_tokens": 51}, "reasoning_tokens", "must not exceed output_tokens (50)"),
        (
            {"cached_tokens": 60, "cache_write_tokens": 41},
            "cache_write_tokens",
            "must not exceed input_tokens - cached_tokens (40)",
        ),
    ],
)
@pytest.mark.parametrize("encode", [_class_events, _class_cloudevents, _class_openai_batch])
def test_a_class_beyond_its_parent_refuses_the_whole_batch_naming_it(
    ingest, encode, case, field, message
):
    good = {"input_tokens": 100, "output_tokens": 50}
    body, where = encode([good, {**good, **case}, good])

    response = ingest(body, **where)

    if encode is _class_openai_batch:  # named as the file names them
        field, message = BATCH_NAMES[field], message.replace("input_", "prompt_")
        message = message.replace("output_", "completion_")
    assert response.status_code == 400
    assert response.json()["errors"] == [{"index": 1, "field": field, "message": message}]
    assert _stored_nothing()


BATCH_NAMES = {
    "reasoning_tokens": "response.body.usage.completion_tokens_details.reasoning_tokens",
    "cache_write_tokens": "response.body.usage.prompt_tokens_details.cache_write_tokens",
}


# --- tokens bound to a tenant: they meter that tenant only, on every ingestion path -----

BOUND = "this token is bound to tenant 'tenant-a': it meters that tenant only"


def _gateway(user, **bound):
    """post(items, path=…): an `ingest` token of `user` bound as `bound` says, posting."""
    _, raw = token_create(user=user, name="gateway", scopes=["ingest"], **bound)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    def post(items, path="/api/v1/usage/events", **kwargs):
        kwargs.setdefault("content_type", "application/json")
        body = items if isinstance(items, bytes | str) else json.dumps(items)
        return api.generic("POST", path, body, **kwargs)

    return post


@pytest.fixture
def bound_ingest(ingest, users, tenant_a, tenant_b):
    return _gateway(users["operator"], bound_tenant=tenant_a)


def test_a_bound_token_refuses_events_of_another_tenant_on_every_path(bound_ingest):
    own, other = event(1), event(2, tenant="tenant-b")
    for response in (
        bound_ingest([own, other]),  # the fast path
        bound_ingest([own, {**other, "ttft_ms": "x"}]),  # the full validator
        bound_ingest([_cloudevent(1), _cloudevent(2, tenant="tenant-b")],
                     path="/api/v1/usage/cloudevents", content_type=CE),
    ):  # fmt: skip
        assert response.status_code == 400
        assert {"index": 1, "field": "tenant", "message": BOUND} in response.json()["errors"]
    openai = bound_ingest(_openai_line(1, created=1773000000),
                          path="/api/v1/usage/openai-batch?tenant=tenant-b",
                          content_type="application/jsonl")  # fmt: skip
    assert openai.status_code == 400
    assert openai.json()["errors"] == [{"field": "tenant", "message": BOUND}]
    assert _stored_nothing()

    # Its own tenant's events are metered; an OpenAI Batch file needs no ?tenant=.
    assert bound_ingest([own]).json() == {"accepted": 1, "duplicates": 0}
    response = bound_ingest(_openai_line(2, created=1773000000),
                            path="/api/v1/usage/openai-batch",
                            content_type="application/jsonl")  # fmt: skip
    assert response.json() == {"accepted": 1, "duplicates": 0}
    assert set(UsageEvent.objects.values_list("tenant__slug", flat=True)) == {"tenant-a"}


def test_a_tenants_own_gateway_meters_its_own_tenant_only(ingest, users, tenant_a, tenant_b):
    """architecture.md, roles: a tenant member's ingest token is bound to its own tenant
    (unbound, it is bound there; another tenant is refused naming the field); it sends that
    tenant's usage, on every usage path, and nothing else of the factory's."""
    from django.core.exceptions import ValidationError

    member = users["tenant"]
    with pytest.raises(ValidationError, match="bound to its own tenant"):
        token_create(user=member, name="x", scopes=["ingest"], bound_tenant=tenant_b)
    token, raw = token_create(user=member, name="our gateway", scopes=["ingest"])
    assert token.bound_tenant == tenant_a
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    def post(body, path="/api/v1/usage/events", content_type="application/json"):
        return api.generic("POST", path, json.dumps(body), content_type=content_type)

    other = post([event(1), event(2, tenant="tenant-b")])
    own = post([event(1)])
    capacity = post([{"pool": "h100-a", "time": "2026-12-16T09:00:00Z", "gpus_installed": 8,
                      "gpus_healthy": 8, "gpus_busy": 4}], path="/api/v1/capacity")  # fmt: skip
    read = api.get("/api/v1/usage")

    assert other.status_code == 400
    assert {"index": 1, "field": "tenant", "message": BOUND} in other.json()["errors"]
    assert own.status_code == 200 and own.json() == {"accepted": 1, "duplicates": 0}
    assert set(UsageEvent.objects.values_list("tenant__slug", flat=True)) == {"tenant-a"}
    assert (capacity.status_code, read.status_code) == (403, 403)  # its scope is ingest alone


def test_only_an_ingest_token_can_be_bound(users, tenant_a):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="Only an ingest token can be bound"):
        token_create(user=users["operator"], name="x", scopes=["read"], bound_tenant=tenant_a)


@pytest.mark.postgres_only
def test_a_batch_is_stored_in_the_same_statements_however_many_tenants_and_models(ingest, tenant_b):
    """Who is asking (1), the tenants (1), the models by name or alias and their deployments
    (1), the keys' insert (their arrays its parameters) and the fold's queue with the sources
    seen (2, in a savepoint here: 2 more; the events' COPY is not counted). The month's
    partition is looked up once a process, by the first batch."""
    make_deployment(model="qwen-32b", pool="h200-a", aliases=["Qwen/Qwen3-32B"])
    ingest([event(0)])  # the token's last use noted, the month's partition made
    one = [event(1000)]
    mixed = [
        event(i, tenant=("tenant-a", "tenant-b")[i % 2],
              model=("llama-70b", "meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen3-32B")[i % 3])
        for i in range(1, 301)
    ]  # fmt: skip
    for batch, accepted in ((one, 1), (mixed, 300)):
        with CaptureQueriesContext(connection) as statements:
            assert ingest(batch).json() == {"accepted": accepted, "duplicates": 0}
        assert len(statements) == 7, [q["sql"][:40] for q in statements.captured_queries]


def test_a_batch_of_replays_and_new_events_stores_and_queues_the_new_ones_alone(ingest):
    """Each new event is stored under its key's id with its own figures, the fold's queue
    names the run of the new ids with their times, and the sources seen take the batch's
    newest time, replays included."""
    ingest([event(1, time="2026-03-01T12:00:00Z"), event(2, time="2026-03-01T09:00:00Z")])
    first = FoldPending.objects.get()
    batch = [
        event(3, time="2026-03-01T10:00:00Z"),
        event(1, time="2026-03-01T12:00:00Z"),  # replays
        event(2, time="2026-03-01T09:00:00Z"),
        event(4, time="2026-03-01T08:00:00Z"),
        event(5, time="2026-03-01T11:00:00Z"),
    ]
    assert ingest(batch).json() == {"accepted": 3, "duplicates": 2}
    keys = dict(EventKey.objects.values_list("event_id", "id"))
    stored = {e.id: (e.input_tokens, e.output_tokens, e.time) for e in UsageEvent.objects.all()}
    assert {i: stored[keys[f"ev-{i}"]] for i in range(1, 6)} == {
        1: (101, 51, datetime(2026, 3, 1, 12, tzinfo=UTC)),
        2: (102, 52, datetime(2026, 3, 1, 9, tzinfo=UTC)),
        3: (103, 53, datetime(2026, 3, 1, 10, tzinfo=UTC)),
        4: (104, 54, datetime(2026, 3, 1, 8, tzinfo=UTC)),
        5: (105, 55, datetime(2026, 3, 1, 11, tzinfo=UTC)),
    }
    new = [keys[f"ev-{i}"] for i in (3, 4, 5)]
    queued = FoldPending.objects.exclude(pk=first.pk).get()
    assert (queued.first_id, queued.last_id, queued.events) == (min(new), max(new), 3)
    assert (queued.time_min, queued.time_max) == (
        datetime(2026, 3, 1, 8, tzinfo=UTC),
        datetime(2026, 3, 1, 11, tzinfo=UTC),
    )
    assert SourceSeen.objects.get().last_event_at == datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert ingest(batch).json() == {"accepted": 0, "duplicates": 5}
    assert FoldPending.objects.count() == 2  # a batch of replays queues nothing


# --- projects (kpis.md 3e): on every path, created at their first event, bound tokens ------

PROJECT_BOUND = "this token is bound to project 'search': it meters that project only"


def _otlp_json(*spans) -> bytes:
    """An OTLP/JSON trace export of GenAI spans (attribute dicts), of resource `gw`."""
    end = int(datetime(2026, 12, 16, 9, 0, tzinfo=UTC).timestamp()) * 10**9

    def value(v):
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}

    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": [{"key": "service.name", "value": value("gw")}]},
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "traceId": f"{i + 1:032x}",
                                    "spanId": f"{i + 1:016x}",
                                    "name": "chat",
                                    "startTimeUnixNano": str(end - 10**9),
                                    "endTimeUnixNano": str(end + i),
                                    "attributes": [
                                        {"key": k, "value": value(v)} for k, v in attrs.items()
                                    ],
                                }
                                for i, attrs in enumerate(spans)
                            ]
                        }
                    ],
                }
            ]
        }
    ).encode()


def _span(project=None, **extra):
    attrs = {"tenant.id": "tenant-a", "gen_ai.request.model": "llama-70b",
             "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10, **extra}  # fmt: skip
    return attrs if project is None else {**attrs, "tokenfactory.project": project}


def _projects_stored():
    return sorted(UsageEvent.objects.values_list("tenant__slug", "project_id").order_by("id"))


def test_every_path_meters_the_events_project_and_creates_it_once(ingest):
    native = ingest([event(1, project="search"), event(2), event(3, project="search")])
    cloud = ingest([_cloudevent(4, project="support-bot")],
                   path="/api/v1/usage/cloudevents", content_type=CE)  # fmt: skip
    openai = ingest(_openai_line(5, created=1773000000),
                    path="/api/v1/usage/openai-batch?tenant=tenant-a&project=eval",
                    content_type="application/jsonl")  # fmt: skip
    otlp = ingest(_otlp_json(_span("search"), _span()), path="/api/v1/otlp/v1/traces")

    assert [r.status_code for r in (native, cloud, openai, otlp)] == [200] * 4
    projects = dict(Project.objects.values_list("slug", "pk"))
    assert sorted(projects) == ["eval", "search", "support-bot"]
    stored = UsageEvent.objects.order_by("id").values_list("project_id", flat=True)
    p = projects
    assert list(stored) == [
        p["search"],
        0,
        p["search"],
        p["support-bot"],
        p["eval"],
        p["search"],
        0,
    ]
    created = AuditEntry.objects.filter(object_type="project", action="create")
    assert sorted((e.after["slug"], e.after["created_by"], e.actor) for e in created) == [
        ("eval", "ingestion", None), ("search", "ingestion", None),
        ("support-bot", "ingestion", None),
    ]  # fmt: skip


def test_the_usage_api_groups_and_filters_by_project(ingest, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = ingest([event(1, project="search"), event(2), event(3, project="search")])
    assert response.status_code == 200, response.json()
    url = "/api/v1/usage?from=2026-03-01&to=2026-03-02"
    rows = ingest.api.get(url).json()["results"]
    assert [(r["project"], r["requests"]) for r in rows] == [("(none)", 1), ("search", 2)]
    for project, expected in (("search", [("search", 2)]), ("(none)", [("(none)", 1)]),
                              ("nope", [])):  # fmt: skip
        rows = ingest.api.get(f"{url}&project={project}").json()["results"]
        assert [(r["project"], r["requests"]) for r in rows] == expected, project


def test_a_replay_naming_another_project_is_a_conflict(ingest):
    assert ingest([event(1, project="search")]).json() == {"accepted": 1, "duplicates": 0}
    assert ingest([event(1, project="search")]).json() == {"accepted": 0, "duplicates": 1}
    for changed in (event(1), event(1, project="eval")):
        response = ingest([changed])
        assert response.status_code == 409
        assert response.json()["errors"][0]["field"] == "id"
    assert not Project.objects.filter(slug="eval").exists()  # a refused batch creates none


def test_a_project_that_is_not_a_slug_is_refused_naming_it(ingest):
    for items in ([event(1, project="no spaces")], [event(1, project="x" * 65)],
                  [event(1, project=7), {**event(2), "ttft_ms": "x"}]):  # fmt: skip
        response = ingest(items)
        assert response.status_code == 400
        assert response.json()["errors"][0]["field"] == "project"
    assert _stored_nothing()


@pytest.fixture
def project_bound(ingest, users, tenant_a, tenant_b):
    search = Project.objects.create(tenant=tenant_a, slug="search", name="Search")
    post = _gateway(users["operator"], bound_project=search)
    post.search = search
    return post


def test_a_project_bound_token_refuses_another_project_on_every_path(project_bound):
    own, other = event(1), event(2, project="eval")
    for response in (
        project_bound([own, other]),  # the fast path
        project_bound([own, {**other, "ttft_ms": 5}, {**event(3), "ttft_ms": "x"}]),
        project_bound([_cloudevent(1), _cloudevent(2, project="eval")],
                      path="/api/v1/usage/cloudevents", content_type=CE),
        project_bound(_openai_line(1, created=1773000000) + _openai_line(2, created=1773000000),
                      path="/api/v1/usage/openai-batch?project=eval",
                      content_type="application/jsonl"),
    ):  # fmt: skip
        assert response.status_code == 400
        errors = response.json()["errors"]
        assert {"index": 1, "field": "project", "message": PROJECT_BOUND} in errors
    assert _stored_nothing()
    otlp = project_bound(_otlp_json(_span(), _span("eval")), path="/api/v1/otlp/v1/traces")
    assert otlp.status_code == 200
    assert f"span 1: project {PROJECT_BOUND}" in otlp.json()["partialSuccess"]["errorMessage"]
    assert not Project.objects.filter(slug="eval").exists()


def test_a_project_bound_tokens_events_without_a_project_are_its_projects(project_bound):
    search = project_bound.search.pk
    assert project_bound([event(1), event(2, project="search")]).status_code == 200
    assert project_bound([_cloudevent(3)], path="/api/v1/usage/cloudevents",
                         content_type=CE).status_code == 200  # fmt: skip
    assert project_bound(_openai_line(4, created=1773000000), path="/api/v1/usage/openai-batch",
                         content_type="application/jsonl").status_code == 200  # fmt: skip
    otlp = project_bound(_otlp_json(_span()), path="/api/v1/otlp/v1/traces")
    assert otlp.status_code == 200, otlp.content
    assert set(UsageEvent.objects.values_list("project_id", flat=True)) == {search}
    assert UsageEvent.objects.count() == 5
    # A replay of its event naming the project it took is the same event.
    assert project_bound([event(1, project="search")]).json() == {"accepted": 0, "duplicates": 1}


def test_a_members_own_gateway_meters_its_tenant_and_project_only(users, tenant_a, tenant_b):
    make_deployment()
    search = Project.objects.create(tenant=tenant_a, slug="search", name="Search")
    _, raw = token_create(user=users["tenant"], name="gw", scopes=["ingest"], bound_project=search)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    refused = api.post("/api/v1/usage/events", [event(1, tenant="tenant-b")], format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "tenant"
    assert api.post("/api/v1/usage/events", [event(2)], format="json").status_code == 200
    assert api.post("/api/v1/capacity", [], format="json").status_code == 403  # not usage
    assert _projects_stored() == [("tenant-a", search.pk)]


def test_the_1001st_project_is_refused_naming_project_and_nothing_is_stored(ingest, tenant_a):
    Project.objects.bulk_create(
        Project(tenant=tenant_a, slug=f"p{i:04}", name=f"P{i}") for i in range(MAX_PROJECTS)
    )
    message = ("tenant 'tenant-a' has 1,000 projects, the most a tenant may have: "
               "name one of them")  # fmt: skip
    response = ingest([event(1, project="p0007"), event(2, project="one-more")])
    assert response.status_code == 400
    assert response.json()["errors"] == [{"index": 1, "field": "project", "message": message}]
    assert _stored_nothing()
    otlp = ingest(_otlp_json(_span("p0001"), _span("one-more")), path="/api/v1/otlp/v1/traces")
    assert f"span 1: project {message}" in otlp.json()["partialSuccess"]["errorMessage"]
    assert UsageEvent.objects.count() == 1
    assert Project.objects.count() == MAX_PROJECTS


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_an_unknown_project_is_created_once_under_concurrent_batches(users, tenant_a):
    make_deployment()
    _, raw = token_create(user=users["operator"], name="gw", scopes=["ingest"])

    def send(i):
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        batch = [event(i * 100 + k, project=f"new-{k % 3}") for k in range(20)]
        return api.post("/api/v1/usage/events", batch, format="json").status_code

    statuses, errors = run_together(send, list(range(8)), timeout=120)
    assert errors == []
    assert statuses == [200] * 8
    assert sorted(Project.objects.values_list("slug", flat=True)) == ["new-0", "new-1", "new-2"]
    assert AuditEntry.objects.filter(object_type="project").count() == 3
    assert UsageEvent.objects.count() == 160
    assert UsageEvent.objects.values("project_id").distinct().count() == 3


def test_a_mixed_batch_stores_each_new_event_once_and_refuses_a_changed_replay_by_its_id(
    ingest, tenant_b
):
    """Two tenants and two sources, replays of stored events, a key repeated in the batch:
    each new event stored once under its key with its own figures (the keys go to the
    database as arrays, the tenants are read by one array), the sources seen at their
    newest times; the batch again stores nothing; a changed replay is refused naming its
    `id`, an unknown tenant naming `tenant`, and nothing of either batch is stored."""
    assert ingest([event(1), event(2, source="gw-b")]).json() == {"accepted": 2, "duplicates": 0}
    batch = [
        event(3, tenant="tenant-b"),
        event(1),  # stored before
        event(4, source="gw-b", time="2026-03-01T11:00:00Z"),
        event(3, tenant="tenant-b"),  # repeated in the batch
        event(2, source="gw-b"),  # stored before
        event(5, tenant="tenant-b", source="gw-b", time="2026-03-01T09:00:00Z"),
    ]
    assert ingest(batch).json() == {"accepted": 3, "duplicates": 3}
    keys = {(k.source, k.event_id): k.id for k in EventKey.objects.all()}
    stored = {
        e.id: (e.tenant.slug, e.input_tokens, e.output_tokens, e.time)
        for e in UsageEvent.objects.select_related("tenant")
    }
    at = datetime(2026, 3, 1, 10, 15, tzinfo=UTC)
    assert {key: stored[pk] for key, pk in keys.items()} == {
        ("default", "ev-1"): ("tenant-a", 101, 51, at),
        ("gw-b", "ev-2"): ("tenant-a", 102, 52, at),
        ("default", "ev-3"): ("tenant-b", 103, 53, at),
        ("gw-b", "ev-4"): ("tenant-a", 104, 54, datetime(2026, 3, 1, 11, tzinfo=UTC)),
        ("gw-b", "ev-5"): ("tenant-b", 105, 55, datetime(2026, 3, 1, 9, tzinfo=UTC)),
    }
    assert dict(SourceSeen.objects.values_list("source", "last_event_at")) == {
        "default": at,
        "gw-b": datetime(2026, 3, 1, 11, tzinfo=UTC),
    }
    assert ingest(batch).json() == {"accepted": 0, "duplicates": 6}
    changed = event(4, source="gw-b", time="2026-03-01T11:00:00Z", output_tokens=999)
    refused = ingest([event(6), event(1), changed])
    assert (refused.status_code, refused.json()["errors"]) == (
        409,
        [{"index": 2, "field": "id", "message": "this (source, id) is already stored with a different payload"}],
    )  # fmt: skip
    unknown = ingest([event(7), event(8, tenant="ghost")])
    assert (unknown.status_code, unknown.json()["errors"]) == (
        400,
        [{"index": 1, "field": "tenant", "message": "unknown tenant 'ghost'"}],
    )
    assert (EventKey.objects.count(), UsageEvent.objects.count()) == (5, 5)
