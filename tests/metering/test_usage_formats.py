"""Usage format converters (metering/ingest/formats.py) on the real sample files."""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from metering.domain.usage.body import PayloadTooLarge
from metering.domain.usage.dedupe import dedupe_within_batch
from metering.domain.usage.fields import EventError
from metering.domain.usage.formats import (
    cloudevents_to_items,
    merge_errors,
    openai_batch_to_items,
    trace_events,
)
from metering.domain.usage.validation import validate_events

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "samples"
TRACES = SAMPLES / "traces"
NOW = datetime(2027, 1, 1, tzinfo=UTC)  # synthetic events, traces relative to 2026-01-01
# A real sample is validated at an instant whose 13-month retention window holds its dates.
GPT_NOW = datetime(2024, 12, 31, tzinfo=UTC)  # openai_batch_output_gpt-4o-mini: 2024-12-23
VLLM_LEGACY_NOW = datetime(2024, 6, 1, tzinfo=UTC)  # vllm_run_batch_output_chat_legacy: 2024-05-13
VLLM_SCORE_NOW = datetime(2025, 2, 1, tzinfo=UTC)  # vllm_run_batch_output_score: 2025-01-25
AZURE_NOW = datetime(2023, 12, 1, tzinfo=UTC)  # azure_llm_2023_*: 2023-11-16


def _sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def _sample_lines(name: str) -> list[dict[str, Any]]:
    return [msgspec.json.decode(line) for line in _sample(name).splitlines() if line.strip()]


def _jsonl(records: list[Any]) -> bytes:
    return b"\n".join(msgspec.json.encode(record) for record in records) + b"\n"


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _token_rows(events: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (e.id, e.time, e.model, e.input_tokens, e.cached_tokens, e.output_tokens, e.status)
        for e in events
    ]


# --- OpenAI Batch output: real samples -------------------------------------------------


# Per real sample: the instant it is validated at, its one model, and its lines as (id, time,
# input, cached, output tokens), each with status "ok".
REAL_SAMPLES = {
    # usage: prompt 20 / completion 10 (reasoning 0 is inside completion, not added),
    # then prompt 22 / completion 10; cached_tokens 0 on both lines.
    "openai_batch_output_gpt-4o-mini.jsonl": (
        GPT_NOW,
        "gpt-4o-mini-2024-07-18",
        [
            ("batch_req_6769ca596b38819093d7ae9f522de924", "2024-12-23T20:36:42", 20, 0, 10),
            ("batch_req_6769ca597e588190920666612634e2b4", "2024-12-23T20:36:43", 22, 0, 10),
        ],
    ),
    "vllm_run_batch_output_chat_legacy.jsonl": (
        VLLM_LEGACY_NOW,
        "meta-llama/Meta-Llama-3-8B-Instruct",
        [
            ("vllm-383d1c59835645aeb2e07d004d62a826", "2024-05-13T20:48:56", 25, 0, 31),
            ("vllm-42e3d09b14b04568afa3f1797751a267", "2024-05-13T20:48:56", 27, 0, 5),
        ],
    ),
    # null completion_tokens_details
    "vllm_run_batch_output_score.jsonl": (
        VLLM_SCORE_NOW,
        "BAAI/bge-reranker-v2-m3",
        [
            ("vllm-f87c5c4539184f618e555744a2965987", "2025-01-25T23:32:24", 37, 0, 0),
            ("vllm-41990c51a26d4fac8419077f12871099", "2025-01-25T23:32:24", 37, 0, 0),
        ],
    ),
}


@pytest.mark.parametrize("name", list(REAL_SAMPLES))
def test_openai_batch_to_items_reads_real_samples(name):
    now, model, lines = REAL_SAMPLES[name]

    items, errors = openai_batch_to_items(body=_sample(name), tenant="acme", pool=None)

    assert errors == []
    assert all("pool" not in item for item in items)
    events, errors = validate_events(items=items, now=now)
    assert errors == []
    assert _token_rows(events) == [
        (id_, _utc(time), model, input_, cached, output, "ok")
        for id_, time, input_, cached, output in lines
    ]


def test_openai_batch_to_items_reads_gpt_4o_mini_output_with_its_pool():
    items, errors = openai_batch_to_items(
        body=_sample("openai_batch_output_gpt-4o-mini.jsonl"), tenant="acme", pool="h100-eu"
    )

    assert errors == []
    assert items[0] == {
        "source": "openai-batch",
        "id": "batch_req_6769ca596b38819093d7ae9f522de924",
        "time": "2024-12-23T20:36:42Z",
        "tenant": "acme",
        "service_tier": "batch",  # every line of a Batch output file
        "model": "gpt-4o-mini-2024-07-18",
        "pool": "h100-eu",
        "status": "ok",
        "input_tokens": 20,
        "cached_tokens": 0,
        "output_tokens": 10,
        "reasoning_tokens": 0,  # completion_tokens_details says so
    }
    events, errors = validate_events(items=items, now=GPT_NOW)
    assert errors == []
    assert {(e.source, e.tenant, e.pool) for e in events} == {("openai-batch", "acme", "h100-eu")}


def test_openai_batch_to_items_accepts_crlf_blank_lines_and_no_final_newline():
    original = _sample("openai_batch_output_gpt-4o-mini.jsonl")
    first, second = original.strip().split(b"\n")
    body = b"\r\n" + first + b"\r\n\r\n   \r\n" + second  # no final newline

    assert openai_batch_to_items(body=body, tenant="acme", pool=None) == openai_batch_to_items(
        body=original, tenant="acme", pool=None
    )
    assert openai_batch_to_items(body=body.decode(), tenant="acme", pool=None)[1] == []


# --- OpenAI Batch output: synthetic variations of the real lines ------------------------


def _gpt_lines() -> list[dict[str, Any]]:
    return _sample_lines("openai_batch_output_gpt-4o-mini.jsonl")


def _classes(item: dict[str, Any]) -> tuple[int, ...]:
    names = ("input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens")
    return (*(item.get(name, 0) for name in names), item.get("reasoning_tokens", 0))


def test_openai_batch_to_items_takes_the_details_as_parts_of_their_counts():
    lines = _gpt_lines()
    usage = lines[0]["response"]["body"]["usage"]
    usage["prompt_tokens_details"]["cached_tokens"] = 12
    usage["prompt_tokens_details"]["cache_write_tokens"] = 5
    usage["completion_tokens_details"]["reasoning_tokens"] = 7

    items, errors = openai_batch_to_items(body=_jsonl(lines), tenant="acme", pool=None)

    assert errors == []
    # input 20 holds cached 12 and cache-write 5; output 10 holds reasoning 7: never added
    assert _classes(items[0]) == (20, 12, 5, 10, 7)
    events, errors = validate_events(items=items, now=GPT_NOW)
    assert errors == []
    assert (events[0].cache_write_tokens, events[0].reasoning_tokens) == (5, 7)


def test_openai_batch_to_items_reads_vllm_created_cache_tokens_as_cache_writes():
    lines = _gpt_lines()
    usage = lines[0]["response"]["body"]["usage"]
    usage["prompt_tokens_details"] = {"cached_tokens": 4, "created_cache_tokens": 9}
    usage["completion_tokens_details"] = None

    items, errors = openai_batch_to_items(body=_jsonl(lines), tenant="acme", pool=None)

    assert errors == []
    assert _classes(items[0]) == (20, 4, 9, 10, 0)


def test_openai_batch_reasoning_beyond_completion_is_refused_naming_the_field():
    lines = _gpt_lines()
    lines[1]["response"]["body"]["usage"]["completion_tokens_details"]["reasoning_tokens"] = 11

    items, conversion = openai_batch_to_items(body=_jsonl(lines), tenant="acme", pool=None)
    _, validation = validate_events(items=items, now=GPT_NOW)

    assert conversion == []
    assert validation == [EventError(1, "reasoning_tokens", "must not exceed output_tokens (10)")]


def test_openai_batch_to_items_defaults_missing_details_and_completion_to_zero():
    lines = _gpt_lines()
    usage = lines[0]["response"]["body"]["usage"]
    del usage["prompt_tokens_details"], usage["completion_tokens"]
    lines[1]["response"]["body"]["usage"]["prompt_tokens_details"]["cached_tokens"] = None

    items, errors = openai_batch_to_items(body=_jsonl(lines), tenant="acme", pool=None)

    assert errors == []
    assert [(i["input_tokens"], i["cached_tokens"], i["output_tokens"]) for i in items] == [
        (20, 0, 0),
        (22, 0, 10),
    ]


def test_openai_batch_to_items_turns_error_lines_into_zero_token_error_events():
    expired = {
        "id": "batch_req_expired",
        "custom_id": "request-3",
        "response": None,
        "error": {"code": "batch_expired", "message": "This request could not be executed."},
    }
    rejected = {
        "id": "batch_req_rejected",
        "custom_id": "request-4",
        "response": {
            "status_code": 400,
            "request_id": "req_4",
            "body": {"error": {"message": "bad", "type": "invalid_request_error"}},
        },
        "error": None,
    }
    server = _gpt_lines()[0] | {"id": "batch_req_500"}
    server["response"]["status_code"] = 500

    items, errors = openai_batch_to_items(
        body=_jsonl([*_gpt_lines(), expired, rejected, server]), tenant="acme", pool=None
    )

    assert errors == []
    events, errors = validate_events(items=items, now=GPT_NOW)
    assert errors == []
    latest = datetime(2024, 12, 23, 20, 36, 43, tzinfo=UTC)  # the file's latest `created`
    assert _token_rows(events)[2:] == [
        ("batch_req_expired", latest, "gpt-4o-mini-2024-07-18", 0, 0, 0, "error"),
        ("batch_req_rejected", latest, "gpt-4o-mini-2024-07-18", 0, 0, 0, "error"),
        (
            "batch_req_500",
            datetime(2024, 12, 23, 20, 36, 42, tzinfo=UTC),  # its own body's `created`
            "gpt-4o-mini-2024-07-18",
            0,
            0,
            0,
            "error",
        ),
    ]


def test_openai_batch_to_items_rejects_error_lines_it_cannot_date():
    expired = {"id": "batch_req_1", "custom_id": "r1", "response": None, "error": {"code": "x"}}

    items, errors = openai_batch_to_items(body=_jsonl([expired]), tenant="acme", pool=None)

    assert items == [None]
    assert errors == [
        EventError(
            0,
            "response.body.created",
            "is required (an error line without it is dated by another line of the file)",
        ),
        EventError(
            0,
            "response.body.model",
            "is required (an error line without it needs a file with a single model)",
        ),
    ]


def test_openai_batch_to_items_reports_malformed_lines_by_index():
    good = _gpt_lines()
    no_usage = _gpt_lines()[0]
    del no_usage["response"]["body"]["usage"]
    no_created = _gpt_lines()[1]
    del no_created["response"]["body"]["created"]
    body = b"\n".join(
        [
            msgspec.json.encode(good[0]),
            b'{"id": "batch_req_broken", "response": ',
            b"",  # blank lines are not records
            b'["not", "an", "object"]',
            msgspec.json.encode(no_usage),
            msgspec.json.encode(no_created),
            msgspec.json.encode({"id": "x", "response": None, "error": None}),
            msgspec.json.encode({"id": "y", "response": {"status_code": "200", "body": {}}}),
            msgspec.json.encode({"id": "z", "response": {"status_code": 200, "body": None}}),
            msgspec.json.encode({"id": "w", "response": 3}),
            msgspec.json.encode(good[1]),
        ]
    )

    items, errors = openai_batch_to_items(body=body, tenant="acme", pool=None)

    assert [item is None for item in items] == [False, *[True] * 8, False]
    assert [(e.index, e.field, e.message) for e in errors] == [
        (1, "", "is not valid JSON: Input data was truncated"),
        (2, "", "must be a JSON object"),
        (3, "response.body.usage", "is required"),
        (4, "response.body.created", "is required"),
        (5, "response", "is required when error is null"),
        (6, "response.status_code", "must be an integer"),
        (7, "response.body", "is required when status_code is below 400"),
        (8, "response", "must be an object or null"),
    ]
    events, validation = validate_events(items=items, now=GPT_NOW)
    assert [e.id for e in events] == [good[0]["id"], good[1]["id"]]
    assert merge_errors(conversion=errors, validation=validation) == errors


def test_openai_batch_to_items_leaves_token_values_to_validate_events():
    lines = _gpt_lines()
    lines[1]["response"]["body"]["usage"]["prompt_tokens"] = "22"
    lines[1]["response"]["body"]["usage"]["prompt_tokens_details"]["cached_tokens"] = 30

    items, errors = openai_batch_to_items(body=_jsonl(lines), tenant="acme", pool=None)
    _, validation = validate_events(items=items, now=GPT_NOW)

    assert errors == []
    assert validation == [EventError(1, "input_tokens", "must be a non-negative integer")]


def test_openai_batch_to_items_rejects_more_than_max_events():
    body = _sample("vllm_run_batch_output_score.jsonl")

    with pytest.raises(PayloadTooLarge, match="at most 1 lines; this one has 2"):
        openai_batch_to_items(body=body, tenant="acme", pool=None, max_events=1)


# --- CloudEvents ------------------------------------------------------------------------


def test_cloudevents_to_items_rejects_openmeter_quickstart_sample():
    quickstart = msgspec.json.decode(_sample("openmeter_cloudevent_quickstart.json"))

    items, errors = cloudevents_to_items(items=[quickstart])
    events, validation = validate_events(items=items, now=NOW)

    assert events == []
    assert merge_errors(conversion=errors, validation=validation) == [
        EventError(0, "time", "is required"),
        EventError(0, "model", "is required"),
        EventError(0, "input_tokens", "is required"),
        EventError(0, "output_tokens", "is required"),
        EventError(0, "method", "is not a known field"),
        EventError(0, "route", "is not a known field"),
    ]


def _cloudevent(**changes: Any) -> dict[str, Any]:
    event = {
        "specversion": "1.0",
        "type": "usage",
        "id": "gw-123",
        "source": "gateway-eu",
        "time": "2026-03-01T11:59:00Z",
        "subject": "acme",
        "data": {"model": "qwen3-32b", "input_tokens": 1000, "output_tokens": 250},
    }
    event.update(changes)
    return event


def test_cloudevents_to_items_converts_a_cloudevent():
    data = {"model": "qwen3-32b", "input_tokens": 9, "cached_tokens": 4, "output_tokens": 3}
    data |= {"tenant": "globex", "pool": "b200-sh", "ttft_ms": 80, "status": "error"}

    items, errors = cloudevents_to_items(
        items=[
            _cloudevent(),
            _cloudevent(id="gw-124", data=data, datacontenttype="application/json"),
        ]
    )
    events, validation = validate_events(items=items, now=NOW)

    assert errors == validation == []
    assert items[0] == {
        "model": "qwen3-32b",
        "input_tokens": 1000,
        "output_tokens": 250,
        "id": "gw-123",
        "source": "gateway-eu",
        "time": "2026-03-01T11:59:00Z",
        "tenant": "acme",
    }
    second = events[1]
    assert (second.source, second.id, second.tenant, second.pool) == (
        "gateway-eu",
        "gw-124",
        "globex",
        "b200-sh",
    )
    assert (second.input_tokens, second.cached_tokens, second.output_tokens) == (9, 4, 3)
    assert (second.ttft_ms, second.status) == (80.0, "error")


def test_cloudevents_to_items_dedups_on_source_and_id():
    items, _ = cloudevents_to_items(
        items=[_cloudevent(), _cloudevent(), _cloudevent(source="other"), _cloudevent(time=None)]
    )
    events, errors = validate_events(items=items[:3], now=NOW)

    assert errors == []
    unique, duplicates, conflicts = dedupe_within_batch(events=events)
    assert (len(unique), duplicates, conflicts) == (2, 1, [])


def test_cloudevents_to_items_requires_time():
    event = _cloudevent()
    del event["time"]

    items, errors = cloudevents_to_items(items=[event])

    assert errors == []
    assert validate_events(items=items, now=NOW)[1] == [EventError(0, "time", "is required")]


def test_cloudevents_to_items_reports_envelope_problems():
    no_version = _cloudevent()
    del no_version["specversion"], no_version["type"], no_version["id"]
    items = [
        _cloudevent(specversion="0.3", type=""),
        no_version,
        _cloudevent(data=None),
        _cloudevent(data="tokens=3"),
        _cloudevent(datacontenttype="text/plain"),
        _cloudevent(data_base64="e30="),
        _cloudevent(
            data={"id": "x", "time": "y", "model": "m", "input_tokens": 1, "output_tokens": 1}
        ),
        "not an event",
    ]

    converted, errors = cloudevents_to_items(items=items)
    _, validation = validate_events(items=converted, now=NOW)

    assert [item is None for item in converted] == [
        False,
        False,
        True,
        True,
        False,
        False,
        False,
        True,
    ]
    assert merge_errors(conversion=errors, validation=validation) == [
        EventError(0, "specversion", 'must be "1.0"'),
        EventError(0, "type", "must be a non-empty string"),
        EventError(1, "specversion", "is required"),
        EventError(1, "type", "is required"),
        EventError(1, "id", "is required"),
        EventError(2, "data", "is required: an object with the token fields"),
        EventError(3, "data", "must be an object with the token fields"),
        EventError(4, "datacontenttype", "must be application/json"),
        EventError(5, "data_base64", "is not supported; send data as a JSON object"),
        EventError(6, "data.id", "must not be set: the CloudEvent's id is used"),
        EventError(6, "data.time", "must not be set: the CloudEvent's time is used"),
        EventError(7, "", "must be a JSON object (a CloudEvent)"),
    ]


def test_cloudevents_to_items_prefers_data_tenant_over_subject():
    data = {"tenant": "globex", "model": "m", "input_tokens": 1, "output_tokens": 1}

    items, _ = cloudevents_to_items(items=[_cloudevent(data=data), _cloudevent(subject=None)])

    assert items[0]["tenant"] == "globex"
    assert "tenant" not in items[1]


# --- Traces: every file, against the figures of traces/README.md ----------------------

# file: (sha256, rows, input tokens, output tokens, error rows, peak requests per minute)
TRACE_FIGURES = {
    "azure_llm_2023_code.csv": (
        "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6",
        8_819,
        18_059_974,
        245_896,
        0,
        585,
    ),
    "azure_llm_2023_conv.csv": (
        "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8",
        19_366,
        22_361_870,
        4_088_665,
        0,
        502,
    ),
    "mooncake_fast25_conversation_trace.jsonl": (
        "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df",
        12_031,
        144_793_823,
        4_122_048,
        0,
        247,
    ),
    "burstgpt_1_first400_via_gitm.csv": (
        "7865fda5dac50938a84dfccb06c405e2f5202969ecfbd671c8399de00f4335f0",
        400,
        208_189,
        110_612,
        17,
        8,
    ),
    "burstgpt_3_first400_via_gitm.csv": (
        "5465fc4c38b0815b8f75d126a120c229ae93632d62e3adf1792f5e8401a73559",
        400,
        246_941,
        68_350,
        1,
        8,
    ),
}


def test_trace_figures_cover_every_trace_file():
    files = {path.name for path in TRACES.iterdir() if path.name != "README.md"}

    assert files == set(TRACE_FIGURES)


@pytest.mark.parametrize("name", sorted(TRACE_FIGURES))
def test_trace_events_match_readme_sums(name):
    sha256, rows, input_tokens, output_tokens, error_rows, peak_per_minute = TRACE_FIGURES[name]
    path = TRACES / name
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha256

    items = list(trace_events(path=path, tenant="acme", model="qwen3-32b"))

    assert len(items) == rows
    assert sum(item["input_tokens"] for item in items) == input_tokens
    assert sum(item["output_tokens"] for item in items) == output_tokens
    assert sum(item["status"] == "error" for item in items) == error_rows
    assert max(Counter(item["time"][:16] for item in items).values()) == peak_per_minute
    assert [item["id"] for item in items[:2]] == [f"{name}:1", f"{name}:2"]
    assert items[-1]["id"] == f"{name}:{rows}"

    now = AZURE_NOW if name.startswith("azure") else NOW
    events, errors = validate_events(items=items, now=now)
    assert errors == []
    assert len(events) == rows
    assert {(e.source, e.tenant, e.model, e.cached_tokens) for e in events} == {
        ("trace", "acme", "qwen3-32b", 0)
    }
    assert all(e.ttft_ms is e.tpot_ms is e.latency_ms is None for e in events)
    assert dedupe_within_batch(events=events)[1:] == (0, [])


def test_trace_events_failed_burstgpt_rows_are_zero_token_errors():
    path = TRACES / "burstgpt_1_first400_via_gitm.csv"

    items = list(trace_events(path=path, tenant="acme", model="gpt-35"))
    failed = [item for item in items if item["status"] == "error"]

    assert len(failed) == 17
    assert {(i["input_tokens"], i["output_tokens"], i["cached_tokens"]) for i in failed} == {
        (0, 0, 0)
    }
    assert all(
        item["input_tokens"] + item["output_tokens"] > 0 for item in items if item not in failed
    )


@pytest.mark.parametrize(
    ("name", "first", "last"),
    [
        # Azure: naive -> UTC, 7th fractional digit trimmed (.9799600 -> .979960).
        ("azure_llm_2023_code.csv", "2023-11-16T18:17:03.979960Z", "2023-11-16T19:14:19.928016Z"),
        ("azure_llm_2023_conv.csv", "2023-11-16T18:15:46.680590Z", "2023-11-16T19:14:08.402527Z"),
        # Relative times from 2026-01-01T00:00:00Z: ms, integer s, float s (day 225).
        (
            "mooncake_fast25_conversation_trace.jsonl",
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:58:56.999000Z",
        ),
        ("burstgpt_1_first400_via_gitm.csv", "2026-01-01T00:00:05Z", "2026-01-01T10:21:14Z"),
        ("burstgpt_3_first400_via_gitm.csv", "2026-08-14T00:01:50Z", "2026-08-14T11:32:43Z"),
    ],
)
def test_trace_events_follow_replay_time_conventions(name, first, last):
    items = list(trace_events(path=TRACES / name, tenant="acme", model="m"))

    assert (items[0]["time"], items[-1]["time"]) == (first, last)


@pytest.mark.parametrize(
    ("name", "hours"),
    [
        (
            "azure_llm_2023_code.csv",
            {
                "2023-11-16T18": (7_717, 15_710_990, 213_958),
                "2023-11-16T19": (1_102, 2_348_984, 31_938),
            },
        ),
        (
            "azure_llm_2023_conv.csv",
            {
                "2023-11-16T18": (15_606, 18_444_477, 3_138_185),
                "2023-11-16T19": (3_760, 3_917_393, 950_480),
            },
        ),
        (
            "burstgpt_1_first400_via_gitm.csv",
            {
                "2026-01-01T00": (38, 27_375, 13_202),
                "2026-01-01T01": (11, 7_769, 2_548),
                "2026-01-01T02": (23, 15_183, 5_463),
                "2026-01-01T03": (13, 10_545, 4_097),
                "2026-01-01T04": (1, 870, 269),
                "2026-01-01T05": (5, 2_575, 1_184),
                "2026-01-01T07": (10, 5_205, 1_473),
                "2026-01-01T08": (55, 30_171, 14_380),
                "2026-01-01T09": (161, 75_809, 43_461),
                "2026-01-01T10": (83, 32_687, 24_535),
            },
        ),
        (
            "burstgpt_3_first400_via_gitm.csv",  # README hours 5400-5411 = day 225, 00-11h
            {
                "2026-08-14T00": (26, 17_040, 5_550),
                "2026-08-14T01": (7, 11_411, 1_922),
                "2026-08-14T02": (14, 9_743, 5_914),
                "2026-08-14T03": (7, 1_579, 1_405),
                "2026-08-14T04": (12, 6_775, 1_594),
                "2026-08-14T05": (8, 3_629, 213),
                "2026-08-14T06": (21, 6_828, 1_494),
                "2026-08-14T07": (5, 26_715, 1_254),
                "2026-08-14T08": (9, 40_274, 2_379),
                "2026-08-14T09": (70, 18_068, 11_022),
                "2026-08-14T10": (151, 73_067, 26_001),
                "2026-08-14T11": (70, 31_812, 9_602),
            },
        ),
        (
            "mooncake_fast25_conversation_trace.jsonl",
            {"2026-01-01T00": (12_031, 144_793_823, 4_122_048)},
        ),
    ],
)
def test_trace_events_match_readme_hourly_figures(name, hours):
    totals: dict[str, list[int]] = {}
    for item in trace_events(path=TRACES / name, tenant="acme", model="m"):
        hour = totals.setdefault(item["time"][:13], [0, 0, 0])
        hour[0] += 1
        hour[1] += item["input_tokens"]
        hour[2] += item["output_tokens"]

    assert {hour: tuple(values) for hour, values in totals.items()} == hours


def test_trace_events_refuses_unknown_layout(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")

    with pytest.raises(ValueError, match="not an Azure, BurstGPT or Mooncake trace"):
        list(trace_events(path=path, tenant="acme", model="m"))


def test_cloudevents_to_items_requires_a_source():
    """CloudEvents 1.0 makes `source` required: an event without one is refused, naming it."""
    no_source = _cloudevent()
    del no_source["source"]

    _, errors = cloudevents_to_items(items=[no_source, _cloudevent(source="")])

    assert [(e.index, e.field, e.message) for e in errors] == [
        (0, "source", "is required"),
        (1, "source", "must be a non-empty string"),
    ]
