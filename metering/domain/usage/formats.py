"""Converters from other usage formats to the raw event dicts of ``validate_events``.

Pure Python, no Django. Every path ends in ``validation.validate_events``, so every event
meets the same rules. Contracts: shared/design/architecture.md ("HTTP API"),
shared/design/data-formats.md sections 4 and 6, shared/samples/traces/README.md.

Converters return ``(items, errors)`` with ``items[i]`` standing for record ``i`` (the
i-th CloudEvent, the i-th non-blank JSONL line). A record that cannot be converted at
all is ``None`` in items and has errors naming the source field (``response.body.created``,
``specversion``...). Value problems (a negative token count) are left to
``validate_events`` and name the event field. ``merge_errors`` combines both lists.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import msgspec

from metering.domain.usage.body import MAX_EVENTS, PayloadTooLarge, json_parsed
from metering.domain.usage.fields import REQUIRED, EventError
from portal.formatting import rfc3339

OPENAI_BATCH_SOURCE: Final = "openai-batch"

BATCH_TIER: Final = "batch"  # every line of an OpenAI Batch output file

TRACE_SOURCE: Final = "trace"

TRACE_EPOCH: Final = datetime(2026, 1, 1, tzinfo=UTC)  # origin of relative trace times

_MAX_UNIX_SECONDS: Final = 253_402_300_799  # 9999-12-31T23:59:59Z

_AZURE_HEADER: Final = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]

_BURSTGPT_COLUMNS: Final = frozenset({"Timestamp", "Request tokens", "Response tokens"})

_CE_FROM_ENVELOPE: Final = ("id", "source", "time")


def merge_errors(
    *, conversion: Sequence[EventError], validation: Sequence[EventError]
) -> list[EventError]:
    """All errors by index, without validate_events' "not an object" for a ``None`` record."""
    unconverted = {error.index for error in conversion}
    kept = [e for e in validation if not (e.field == "" and e.index in unconverted)]
    return sorted([*conversion, *kept], key=lambda error: error.index)


# --- OpenAI Batch output (and vLLM run-batch) -----------------------------------------


def openai_batch_to_items(
    *,
    body: bytes | str,
    tenant: str,
    pool: str | None,
    project: str | None = None,
    max_events: int = MAX_EVENTS,
) -> tuple[list[dict[str, Any] | None], list[EventError]]:
    """One event per non-blank line of an OpenAI Batch output file (JSONL).

    Lines are ``{id, custom_id, response: {status_code, request_id, body}, error}`` or the
    legacy vLLM shape with the ChatCompletion directly in ``response``. LF or CRLF, blank
    lines and a missing final newline are fine; error indexes count non-blank lines from 0.
    Event: source "openai-batch", service tier "batch", id = the line's ``id``, time = body
    ``created`` (Unix seconds), model = body ``model`` (an alias, resolved by the caller), the
    query's `project` (the whole file's, kpis.md 3e), input =
    ``prompt_tokens``, cached = ``prompt_tokens_details.cached_tokens`` (null or missing
    -> 0), cache-write = ``prompt_tokens_details.cache_write_tokens`` (vLLM:
    ``created_cache_tokens``), output = ``completion_tokens`` (null or missing -> 0),
    reasoning = ``completion_tokens_details.reasoning_tokens``: the details are parts of
    the counts they detail, never added to them (data-formats.md section 4). A line with
    a non-null ``error``, a status_code >= 400 or a null response is an error event with
    zero tokens; when its body has no ``created`` (or ``model``) it takes the latest
    ``created`` (the only ``model``) of the file's other lines, and is an error naming
    ``response.body.created`` (``.model``) when there is none.
    Raises PayloadTooLarge past max_events lines.
    """
    raw = body.encode() if isinstance(body, str) else body
    lines = [line for line in raw.split(b"\n") if line.strip()]
    if len(lines) > max_events:
        raise PayloadTooLarge(
            f"a batch holds at most {max_events} lines; this one has {len(lines)}"
        )

    errors: list[EventError] = []
    parsed: list[_BatchLine | None] = []
    for index, line in enumerate(lines):
        parsed.append(_parse_batch_line(index, line, errors))

    created_values = [p.created for p in parsed if p is not None and p.created is not None]
    fallback_time = _unix_torfc3339(max(created_values)) if created_values else None
    models = {p.model for p in parsed if p is not None and type(p.model) is str}
    fallback_model = next(iter(models)) if len(models) == 1 else None

    items: list[dict[str, Any] | None] = []
    for index, batch_line in enumerate(parsed):
        if batch_line is None:
            items.append(None)
            continue
        problems: list[tuple[str, str]] = []
        item = _batch_item(batch_line, tenant, pool, fallback_time, fallback_model, problems)
        if project is not None and item:
            item["project"] = project
        errors.extend(EventError(index, field, message) for field, message in problems)
        items.append(None if problems else item)
    errors.sort(key=lambda error: error.index)
    return items, errors


# Where a line's ChatCompletion holds each event field it became.
_BATCH_FIELDS: Final = {
    "input_tokens": "usage.prompt_tokens",
    "output_tokens": "usage.completion_tokens",
    "cached_tokens": "usage.prompt_tokens_details.cached_tokens",
    "cache_write_tokens": "usage.prompt_tokens_details.cache_write_tokens",
    "reasoning_tokens": "usage.completion_tokens_details.reasoning_tokens",
    "time": "created",
    "model": "model",
}


# The counts as a ChatCompletion's usage names them, in messages comparing them.
_BATCH_NAMES: Final = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}
_BATCH_WORDS: Final = re.compile(r"\b(input_tokens|output_tokens)\b")


def openai_batch_error_names(
    *, body: bytes | str, errors: Sequence[EventError]
) -> list[EventError]:
    """`errors` of the events of an OpenAI Batch file named as its lines name the values:
    `input_tokens` as `response.body.usage.prompt_tokens`, `time` as its `created`
    (vLLM's `created_cache_tokens` as itself). Other fields (`id`, the `tenant` of the
    query) and the conversion's errors, already named so, are kept."""
    raw = body.encode() if isinstance(body, str) else body
    lines = [line for line in raw.split(b"\n") if line.strip()]
    named = []
    for error in errors:
        inner = _BATCH_FIELDS.get(error.field)
        if inner is not None and error.index < len(lines):
            line = _parse_batch_line(error.index, lines[error.index], [])
            if line is not None:  # converted: its usage and details are objects
                usage = (line.body or {}).get("usage") or {}
                details = usage.get("prompt_tokens_details") or {}
                if error.field == "cache_write_tokens" and "cache_write_tokens" not in details:
                    inner = "usage.prompt_tokens_details.created_cache_tokens"
                message = _BATCH_WORDS.sub(lambda m: _BATCH_NAMES[m[0]], error.message)
                error = EventError(error.index, f"{line.path}.{inner}", message)
        named.append(error)
    return named


class _BatchLine(msgspec.Struct):
    line: dict[str, Any]
    body: dict[str, Any] | None
    path: str  # where the ChatCompletion sits: "response.body" or legacy "response"
    is_error: bool
    created: int | float | None  # valid Unix seconds, else None
    model: Any


def _parse_batch_line(index: int, line: bytes, errors: list[EventError]) -> _BatchLine | None:
    record, problem = json_parsed(line)
    if problem:
        errors.append(EventError(index, "", problem))
        return None
    if type(record) is not dict:
        errors.append(EventError(index, "", "must be a JSON object"))
        return None

    response = record.get("response")
    if response is not None and type(response) is not dict:
        errors.append(EventError(index, "response", "must be an object or null"))
        return None
    body: Any = response
    path = "response"
    status_code: Any = None
    if response is not None and ("status_code" in response or "body" in response):
        body, path = response.get("body"), "response.body"
        status_code = response.get("status_code")
        if status_code is not None and type(status_code) is not int:
            errors.append(EventError(index, "response.status_code", "must be an integer"))
            return None
    if body is not None and type(body) is not dict:
        errors.append(EventError(index, path, "must be an object"))
        return None

    error = record.get("error")
    if response is None and error is None:
        errors.append(EventError(index, "response", "is required when error is null"))
        return None
    is_error = error is not None or response is None or (status_code or 0) >= 400
    created = body.get("created") if body is not None else None
    return _BatchLine(
        line=record,
        body=body,
        path=path,
        is_error=is_error,
        created=created if _unix_torfc3339(created) else None,
        model=body.get("model") if body is not None else None,
    )


def _batch_item(
    line: _BatchLine,
    tenant: str,
    pool: str | None,
    fallback_time: str | None,
    fallback_model: str | None,
    problems: list[tuple[str, str]],
) -> dict[str, Any]:
    if line.body is None and not line.is_error:
        problems.append((line.path, f"{REQUIRED} when status_code is below 400"))
        return {}
    body = line.body or {}
    path = line.path if line.body is not None else "response.body"
    # Served by the batch tier, whatever tier its body names (architecture.md "Ingestion").
    item: dict[str, Any] = {
        "source": OPENAI_BATCH_SOURCE,
        "tenant": tenant,
        "service_tier": BATCH_TIER,
    }
    if "id" in line.line:
        item["id"] = line.line["id"]
    if pool is not None:
        item["pool"] = pool

    raw_created = body.get("created")
    if raw_created is not None:
        time = _unix_torfc3339(raw_created)
        if time is None:
            problems.append((f"{path}.created", "must be Unix seconds from 0 to year 9999"))
    elif line.is_error and fallback_time is not None:
        time = fallback_time
    else:
        time = None
        message = REQUIRED
        if line.is_error:
            message += " (an error line without it is dated by another line of the file)"
        problems.append((f"{path}.created", message))
    item["time"] = time

    model = body.get("model")
    if model is None and line.is_error:
        model = fallback_model
    if model is None:
        message = REQUIRED
        if line.is_error:
            message += " (an error line without it needs a file with a single model)"
        problems.append((f"{path}.model", message))
    item["model"] = model

    if line.is_error:
        item.update(status="error", input_tokens=0, cached_tokens=0, output_tokens=0)
        return item
    item["status"] = "ok"
    usage = body.get("usage")
    if type(usage) is not dict:
        message = REQUIRED if usage is None else "must be an object"
        problems.append((f"{path}.usage", message))
        return item
    if usage.get("prompt_tokens") is None:
        problems.append((f"{path}.usage.prompt_tokens", REQUIRED))
    item["input_tokens"] = usage.get("prompt_tokens")
    item["output_tokens"] = _zero_if_null(usage.get("completion_tokens"))  # vLLM: may be null
    details = usage.get("prompt_tokens_details")  # vLLM: null unless enabled
    if details is None:
        item["cached_tokens"] = 0
    elif type(details) is dict:
        item["cached_tokens"] = _zero_if_null(details.get("cached_tokens"))
        written = details.get("cache_write_tokens")
        if written is None:  # vLLM's name for the same count
            written = details.get("created_cache_tokens")
        if written is not None:
            item["cache_write_tokens"] = written
    else:
        problems.append((f"{path}.usage.prompt_tokens_details", "must be an object or null"))
    details = usage.get("completion_tokens_details")
    if type(details) is dict:
        if details.get("reasoning_tokens") is not None:
            item["reasoning_tokens"] = details["reasoning_tokens"]
    elif details is not None:
        problems.append((f"{path}.usage.completion_tokens_details", "must be an object or null"))
    return item


def _zero_if_null(value: Any) -> Any:
    return 0 if value is None else value


def _unix_torfc3339(value: Any) -> str | None:
    """RFC 3339 UTC text for Unix seconds, or None when value is not such a number."""
    # Comparisons also refuse NaN and infinities; type() refuses booleans.
    if type(value) not in (int, float) or not 0 <= value <= _MAX_UNIX_SECONDS:
        return None
    return rfc3339(datetime.fromtimestamp(value, UTC))


# --- CloudEvents 1.0 batch ----------------------------------------------------------


def cloudevents_to_items(
    *, items: Sequence[Any]
) -> tuple[list[dict[str, Any] | None], list[EventError]]:
    """Events from a decoded CloudEvents 1.0 batch (application/cloudevents-batch+json).

    Requires ``specversion`` "1.0", a ``source`` and a ``type``; ``id``, ``source`` and ``time`` become the
    event's (time is required: a now() default would make every replay a conflict), and
    (source, id) is the dedup key. ``data`` must be an object holding the other event
    fields; the tenant is ``data.tenant``, else ``subject``. Other data keys are refused
    by validate_events as unknown fields; ``data`` must not repeat id, source or time.
    Extension attributes are ignored.
    """
    converted: list[dict[str, Any] | None] = []
    errors: list[EventError] = []
    for index, event in enumerate(items):
        if type(event) is not dict:
            errors.append(EventError(index, "", "must be a JSON object (a CloudEvent)"))
            converted.append(None)
            continue
        problems = _cloudevent_problems(event)
        errors.extend(EventError(index, field, message) for field, message in problems)
        data = event.get("data")
        if type(data) is not dict:
            converted.append(None)
            continue
        item = {key: value for key, value in data.items() if key not in _CE_FROM_ENVELOPE}
        for key in _CE_FROM_ENVELOPE:
            if key in event:
                item[key] = event[key]
        if item.get("tenant") is None and event.get("subject") is not None:
            item["tenant"] = event["subject"]
        converted.append(item)
    return converted, errors


def _cloudevent_problems(event: dict[str, Any]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    specversion = event.get("specversion")
    if specversion is None:
        problems.append(("specversion", REQUIRED))
    elif specversion != "1.0":
        problems.append(("specversion", 'must be "1.0"'))
    source = event.get("source")  # CloudEvents 1.0: a required, non-empty URI-reference
    if source is None:
        problems.append(("source", REQUIRED))
    elif type(source) is not str or not source:
        problems.append(("source", "must be a non-empty string"))
    event_type = event.get("type")
    if event_type is None:
        problems.append(("type", REQUIRED))
    elif type(event_type) is not str or not event_type:
        problems.append(("type", "must be a non-empty string"))
    content_type = event.get("datacontenttype")
    if content_type is not None and (
        type(content_type) is not str
        or content_type.split(";")[0].strip().lower() != "application/json"
    ):
        problems.append(("datacontenttype", "must be application/json"))
    if "data_base64" in event:
        problems.append(("data_base64", "is not supported; send data as a JSON object"))
    data = event.get("data")
    if data is None:
        problems.append(("data", f"{REQUIRED}: an object with the token fields"))
    elif type(data) is not dict:
        problems.append(("data", "must be an object with the token fields"))
    else:
        for key in _CE_FROM_ENVELOPE:
            if key in data:
                problems.append((f"data.{key}", f"must not be set: the CloudEvent's {key} is used"))
    return problems


# --- Request traces (tests and demo) -------------------------------------------------


def trace_events(*, path: Path, tenant: str, model: str) -> Iterator[dict[str, Any]]:
    """Raw events replaying a trace of shared/samples/traces, by its README's conventions.

    Azure (CSV, naive timestamps read as UTC, 7th fractional digit trimmed, CRLF, no final
    newline); Mooncake (JSONL, ms) and BurstGPT (CSV, s, integers or floats) relative to
    2026-01-01T00:00:00Z. id = "<file name>:<data row number from 1>", source "trace",
    cached 0, no latencies; a BurstGPT row with 0 request and 0 response tokens is a
    failed request (status "error"). Every row gets ``model`` (BurstGPT's Model column is
    not used). Raises ValueError for a file of another layout.
    """
    if path.suffix == ".jsonl":
        yield from _mooncake_events(path, tenant, model)
        return
    with path.open(newline="", encoding="utf-8") as handle:
        rows = csv.reader(handle)
        header = next(rows, [])
        if header == _AZURE_HEADER:
            yield from _azure_events(path.name, rows, tenant, model)
        elif set(header) >= _BURSTGPT_COLUMNS:
            yield from _burstgpt_events(path.name, header, rows, tenant, model)
        else:
            raise ValueError(f"{path.name}: not an Azure, BurstGPT or Mooncake trace")


def _trace_event(
    name: str, row: int, moment: datetime, tenant: str, model: str, tokens: tuple[int, int]
) -> dict[str, Any]:
    input_tokens, output_tokens = tokens
    return {
        "source": TRACE_SOURCE,
        "id": f"{name}:{row}",
        "time": rfc3339(moment),
        "tenant": tenant,
        "model": model,
        "input_tokens": input_tokens,
        "cached_tokens": 0,
        "output_tokens": output_tokens,
        "status": "ok",
    }


def _azure_events(
    name: str, rows: Iterator[list[str]], tenant: str, model: str
) -> Iterator[dict[str, Any]]:
    number = 0
    for row in rows:
        if not row:
            continue
        number += 1
        stamp, context_tokens, generated_tokens = row
        whole, _, fraction = stamp.partition(".")
        naive = datetime.fromisoformat(f"{whole}.{fraction[:6]}" if fraction else whole)
        moment = naive.replace(tzinfo=UTC)  # the trace has no zone: read as UTC
        tokens = (int(context_tokens), int(generated_tokens))
        yield _trace_event(name, number, moment, tenant, model, tokens)


def _burstgpt_events(
    name: str, header: list[str], rows: Iterator[list[str]], tenant: str, model: str
) -> Iterator[dict[str, Any]]:
    at = {column: position for position, column in enumerate(header)}
    number = 0
    for row in rows:
        if not row:
            continue
        number += 1
        moment = TRACE_EPOCH + timedelta(seconds=float(row[at["Timestamp"]]))
        tokens = (int(row[at["Request tokens"]]), int(row[at["Response tokens"]]))
        event = _trace_event(name, number, moment, tenant, model, tokens)
        if tokens == (0, 0):
            event["status"] = "error"
        yield event


def _mooncake_events(path: Path, tenant: str, model: str) -> Iterator[dict[str, Any]]:
    number = 0
    with path.open("rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            number += 1
            record = msgspec.json.decode(line)
            try:
                moment = TRACE_EPOCH + timedelta(milliseconds=record["timestamp"])
                tokens = (record["input_length"], record["output_length"])
            except (KeyError, TypeError):
                raise ValueError(f"{path.name}:{number}: not a Mooncake trace row") from None
            yield _trace_event(path.name, number, moment, tenant, model, tokens)
