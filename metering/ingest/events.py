"""Decoding and validation of usage events: pure Python, no Django.

The contract is "HTTP API" in shared/design/architecture.md. This module turns a
request body into plain objects (``decode_batch``), checks every event field by
hand (``validate_events``; no schema library per event, it runs on every ingest
request) and splits repeats inside one batch (``dedupe_within_batch``). Resolving
tenant, model and pool slugs against the database is the caller's job.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from hashlib import blake2b
from typing import Any, Final, Literal

import msgspec

MAX_TOKENS: Final = 2**31 - 1
MAX_EVENTS: Final = 10_000
MAX_BYTES: Final = 32 * 1024 * 1024  # after decompression
FUTURE_TOLERANCE: Final = timedelta(minutes=5)
ID_MAX_LENGTH: Final = 128  # id and source
SLUG_MAX_LENGTH: Final = 128  # tenant and pool
MODEL_MAX_LENGTH: Final = 256  # slugs and engine aliases such as "meta-llama/Meta-Llama-3-8B"

REQUIRED_FIELDS: Final = ("id", "time", "tenant", "model", "input_tokens", "output_tokens")
EVENT_FIELDS: Final = frozenset(
    {
        *REQUIRED_FIELDS,
        "source",
        "pool",
        "cached_tokens",
        "ttft_ms",
        "tpot_ms",
        "latency_ms",
        "status",
    }
)

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})?", re.ASCII
)
_SLUG = re.compile(r"[-a-zA-Z0-9_]+")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"

REQUIRED = "is required"
NOT_OBJECT = "must be a JSON object"
UNKNOWN_FIELD = "is not a known field"
BAD_TOKENS = "must be a non-negative integer"
TOO_MANY_TOKENS = f"must be at most {MAX_TOKENS}"
BAD_LATENCY = "must be a non-negative finite number"
BAD_TIME = "must be an RFC 3339 date-time such as 2026-01-01T00:00:00Z"
NAIVE_TIME = "must include a time zone (Z or +hh:mm)"
INVALID_TIME = "is not a valid date-time"
FUTURE_TIME = "is more than 5 minutes in the future"
BAD_SLUG = f"must be a slug: 1 to {SLUG_MAX_LENGTH} letters, digits, hyphens or underscores"
BAD_STATUS = 'must be "ok" or "error"'


class BatchError(ValueError):
    """The body as a whole cannot be read (HTTP 400); ``message`` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PayloadTooLarge(Exception):
    """The batch has more events or decompressed bytes than allowed (HTTP 413)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class FieldError(msgspec.Struct, frozen=True):
    """One problem in a batch: the event ``index``, its ``field`` ("" = the whole item)."""

    index: int
    field: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "field": self.field, "message": self.message}


class EventIn(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A validated usage event; ``model`` is still a slug or an engine alias."""

    source: str
    id: str
    time: datetime  # request end, aware, UTC
    tenant: str
    model: str
    pool: str | None
    input_tokens: int  # cached ones included
    cached_tokens: int  # subset of input_tokens
    output_tokens: int
    ttft_ms: float | None
    tpot_ms: float | None
    latency_ms: float | None
    status: Literal["ok", "error"]
    payload_hash: str  # 32 hex chars; same (source, id) + other hash = conflict


def decompress_body(
    *, body: bytes, content_encoding: str | None, max_bytes: int = MAX_BYTES
) -> bytes:
    """Undo ``Content-Encoding`` (none, identity or gzip), never producing more than max_bytes.

    Raises BatchError for another encoding or a broken gzip stream, PayloadTooLarge past
    max_bytes. Gzip is inflated incrementally, so a zip bomb stops at max_bytes + 1.
    """
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        if len(body) > max_bytes:
            raise PayloadTooLarge(f"the body is larger than {max_bytes} bytes")
        return bytes(body)
    if codings not in (["gzip"], ["x-gzip"]):
        raise BatchError(f"Content-Encoding {content_encoding!r} is not supported; use gzip")
    return _gunzip(bytes(body), max_bytes)


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    inflater = zlib.decompressobj(wbits=31)  # gzip header and trailer required
    try:
        while True:
            # Ask for one byte more than allowed: getting it proves the body too large.
            chunk = inflater.decompress(data, max_bytes + 1 - total)
            total += len(chunk)
            if total > max_bytes:
                raise PayloadTooLarge(f"the body inflates to more than {max_bytes} bytes")
            parts.append(chunk)
            if inflater.eof:
                rest = inflater.unused_data
                if rest.startswith(_GZIP_MAGIC):  # concatenated gzip members
                    inflater, data = zlib.decompressobj(wbits=31), rest
                    continue
                if rest.strip(b"\x00"):
                    raise BatchError("the body has data after the end of the gzip stream")
                break
            data = inflater.unconsumed_tail
            if not data:
                raise BatchError("the gzip body is truncated")
    except zlib.error as exc:
        raise BatchError(f"the body is not valid gzip: {exc}") from None
    return b"".join(parts)


def decode_batch(
    *,
    body: bytes,
    content_encoding: str | None,
    max_events: int = MAX_EVENTS,
    max_bytes: int = MAX_BYTES,
) -> list[Any]:
    """Decompress and decode a JSON array of events into plain Python objects.

    Raises BatchError (malformed JSON, not UTF-8, nested too deeply, not an array) or
    PayloadTooLarge (more than max_bytes after decompression, more than max_events).
    A leading UTF-8 byte order mark is ignored (RFC 8259 allows it).
    """
    data = decompress_body(body=body, content_encoding=content_encoding, max_bytes=max_bytes)
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    if not data.strip():
        raise BatchError("the body is empty; send a JSON array of events")
    try:
        decoded = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise BatchError(f"the body is not valid UTF-8 JSON: {exc}") from None
    except RecursionError:
        raise BatchError("the body is not valid JSON: it is nested too deeply") from None
    if type(decoded) is not list:
        raise BatchError(f"the body must be a JSON array of events, not {_json_kind(decoded)}")
    if len(decoded) > max_events:
        raise PayloadTooLarge(
            f"a batch holds at most {max_events} events; this one has {len(decoded)}"
        )
    return decoded


def _json_kind(value: Any) -> str:
    kinds = {dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def validate_events(
    *, items: Sequence[Any], now: datetime, default_source: str = "default"
) -> tuple[list[EventIn], list[FieldError]]:
    """Validate decoded items; return the valid events and every error of every item.

    Each error names the item's index and field (``""`` for an item that is not an
    object; an unknown key is refused with an error naming that key). ``null`` counts as
    absent: required fields then get "is required", optional ones their default
    (source ``default_source``, pool None, cached_tokens 0, latencies None, status "ok").
    Integers exclude booleans and floats; latencies (ms) are finite non-negative numbers;
    ``time`` is RFC 3339 with a zone (or an aware datetime), at most 5 minutes after
    ``now``. The batch is all-or-nothing, so when errors is not empty the caller rejects
    it; events then holds only the valid items, whose positions no longer match indexes.
    """
    if now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    latest = now + FUTURE_TOLERANCE
    events: list[EventIn] = []
    errors: list[FieldError] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            errors.append(FieldError(index, "", NOT_OBJECT))
            continue
        event = _validate_item(item, index, latest, default_source, errors)
        if event is not None:
            events.append(event)
    return events, errors


def _validate_item(
    item: dict[Any, Any],
    index: int,
    latest: datetime,
    default_source: str,
    errors: list[FieldError],
) -> EventIn | None:
    # Each check is a fast inline test for the valid case; the helper that words the
    # error runs only on failure (this loop runs for every event of every request).
    error_count = len(errors)
    get = item.get

    event_id = get("id")
    if not (
        type(event_id) is str
        and 0 < len(event_id) <= ID_MAX_LENGTH
        and event_id.isascii()
        and event_id.isprintable()
    ):
        errors.append(FieldError(index, "id", _ascii_id_problem(event_id)))

    source = get("source")
    if source is None:
        source = default_source
    elif problem := _ascii_id_problem(source):
        errors.append(FieldError(index, "source", problem))

    time, problem = _parse_time(get("time"))
    if time is not None and time > latest:
        time, problem = None, FUTURE_TIME
    if problem:
        errors.append(FieldError(index, "time", problem))

    tenant = get("tenant")
    if not (type(tenant) is str and len(tenant) <= SLUG_MAX_LENGTH and _SLUG.fullmatch(tenant)):
        errors.append(FieldError(index, "tenant", REQUIRED if tenant is None else BAD_SLUG))

    model = get("model")
    if problem := _model_problem(model):
        errors.append(FieldError(index, "model", problem))

    pool = get("pool")
    if pool is not None and not (
        type(pool) is str and len(pool) <= SLUG_MAX_LENGTH and _SLUG.fullmatch(pool)
    ):
        errors.append(FieldError(index, "pool", BAD_SLUG))

    input_tokens = get("input_tokens")
    input_ok = type(input_tokens) is int and 0 <= input_tokens <= MAX_TOKENS
    if not input_ok:
        errors.append(FieldError(index, "input_tokens", _token_problem(input_tokens)))

    cached_tokens = get("cached_tokens")
    if cached_tokens is None:
        cached_tokens = 0
    elif not (type(cached_tokens) is int and 0 <= cached_tokens <= MAX_TOKENS):
        errors.append(FieldError(index, "cached_tokens", _token_problem(cached_tokens)))
    elif input_ok and cached_tokens > input_tokens:
        message = f"must not exceed input_tokens ({input_tokens})"
        errors.append(FieldError(index, "cached_tokens", message))

    output_tokens = get("output_tokens")
    if not (type(output_tokens) is int and 0 <= output_tokens <= MAX_TOKENS):
        errors.append(FieldError(index, "output_tokens", _token_problem(output_tokens)))

    ttft_ms = get("ttft_ms")
    if ttft_ms is not None:
        ttft_ms = _latency(ttft_ms, index, "ttft_ms", errors)
    tpot_ms = get("tpot_ms")
    if tpot_ms is not None:
        tpot_ms = _latency(tpot_ms, index, "tpot_ms", errors)
    latency_ms = get("latency_ms")
    if latency_ms is not None:
        latency_ms = _latency(latency_ms, index, "latency_ms", errors)

    status = get("status")
    if status is None:
        status = "ok"
    elif type(status) is not str or status not in ("ok", "error"):
        errors.append(FieldError(index, "status", BAD_STATUS))

    if not item.keys() <= EVENT_FIELDS:
        for key in item:
            if key not in EVENT_FIELDS:
                errors.append(FieldError(index, str(key)[:ID_MAX_LENGTH], UNKNOWN_FIELD))

    if len(errors) != error_count or time is None:
        return None
    return EventIn(
        source=source,
        id=event_id,
        time=time,
        tenant=tenant,
        model=model,
        pool=pool,
        input_tokens=input_tokens,
        cached_tokens=cached_tokens,
        output_tokens=output_tokens,
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        latency_ms=latency_ms,
        status=status,
        payload_hash=_hash(
            source,
            event_id,
            time,
            tenant,
            model,
            pool,
            input_tokens,
            cached_tokens,
            output_tokens,
            ttft_ms,
            tpot_ms,
            latency_ms,
            status,
        ),
    )


def _ascii_id_problem(value: Any) -> str | None:
    if value is None:
        return REQUIRED
    if type(value) is not str:
        return "must be a string"
    if not value:
        return "must not be empty"
    if len(value) > ID_MAX_LENGTH:
        return f"must be at most {ID_MAX_LENGTH} characters"
    if not (value.isascii() and value.isprintable()):
        return "must contain only printable ASCII characters"
    return None


def _model_problem(value: Any) -> str | None:
    if value is None:
        return REQUIRED
    if type(value) is not str:
        return "must be a string"
    if not value or len(value) > MODEL_MAX_LENGTH:
        return f"must be 1 to {MODEL_MAX_LENGTH} characters"
    if not value.isprintable() or value.strip() != value:
        return "must be printable text without leading or trailing spaces"
    return None


def _token_problem(value: Any) -> str:
    if value is None:
        return REQUIRED
    if type(value) is not int or value < 0:  # type() also refuses bool
        return BAD_TOKENS
    return TOO_MANY_TOKENS


def _latency(value: Any, index: int, field: str, errors: list[FieldError]) -> float | None:
    kind = type(value)
    if kind is float:
        if value >= 0.0 and math.isfinite(value):  # NaN fails the comparison
            return value
    elif kind is int and value >= 0:
        try:
            return float(value)
        except OverflowError:
            pass
    errors.append(FieldError(index, field, BAD_LATENCY))
    return None


def _parse_time(value: Any) -> tuple[datetime | None, str | None]:
    """An aware UTC datetime, or None and the reason."""
    if value is None:
        return None, REQUIRED
    if type(value) is str:
        match = _RFC3339.fullmatch(value)
        if match is None:
            return None, BAD_TIME
        if match.group(1) is None:
            return None, NAIVE_TIME
        try:
            parsed = datetime.fromisoformat(value.upper())  # RFC 3339 allows "t" and "z"
        except ValueError:  # month 13, second 60, offset 24:00...
            return None, INVALID_TIME
    elif isinstance(value, datetime):
        if value.utcoffset() is None:
            return None, NAIVE_TIME
        parsed = value
    else:
        return None, BAD_TIME
    if parsed.tzinfo is UTC:
        return parsed, None
    try:
        return parsed.astimezone(UTC), None
    except OverflowError:
        return None, INVALID_TIME


def _hash(
    source: str,
    event_id: str,
    time: datetime,
    tenant: str,
    model: str,
    pool: str | None,
    input_tokens: int,
    cached_tokens: int,
    output_tokens: int,
    ttft_ms: float | None,
    tpot_ms: float | None,
    latency_ms: float | None,
    status: str,
) -> str:
    # Built from stdlib formatting only (stored hashes must survive library upgrades).
    # "\x1f" cannot occur in a valid field, and "" is no valid value, so None -> "".
    canonical = "\x1f".join(
        (
            "v1",
            source,
            event_id,
            str((time - _EPOCH) // _MICROSECOND),
            tenant,
            model,
            pool or "",
            str(input_tokens),
            str(cached_tokens),
            str(output_tokens),
            "" if ttft_ms is None else repr(ttft_ms),
            "" if tpot_ms is None else repr(tpot_ms),
            "" if latency_ms is None else repr(latency_ms),
            status,
        )
    )
    return blake2b(canonical.encode(), digest_size=16, person=b"usage-event-v1").hexdigest()


def payload_hash(
    *,
    source: str,
    id: str,
    time: datetime,
    tenant: str,
    model: str,
    pool: str | None,
    input_tokens: int,
    cached_tokens: int,
    output_tokens: int,
    ttft_ms: float | None,
    tpot_ms: float | None,
    latency_ms: float | None,
    status: str,
) -> str:
    """The payload hash ``validate_events`` gives an event with these (valid) values."""
    return _hash(
        source,
        id,
        time.astimezone(UTC),
        tenant,
        model,
        pool,
        input_tokens,
        cached_tokens,
        output_tokens,
        None if ttft_ms is None else float(ttft_ms),
        None if tpot_ms is None else float(tpot_ms),
        None if latency_ms is None else float(latency_ms),
        status,
    )


def dedupe_within_batch(*, events: Sequence[EventIn]) -> tuple[list[EventIn], int, list[int]]:
    """Split repeats of a (source, id) inside one valid batch.

    Returns (first occurrences in order, number of later repeats with the same payload
    hash, indexes of later repeats with a different hash). Indexes are positions in
    ``events``, which are batch indexes when validate_events reported no error.
    """
    seen: dict[tuple[str, str], str] = {}
    unique: list[EventIn] = []
    duplicates = 0
    conflicts: list[int] = []
    for index, event in enumerate(events):
        key = (event.source, event.id)
        first_hash = seen.get(key)
        if first_hash is None:
            seen[key] = event.payload_hash
            unique.append(event)
        elif first_hash == event.payload_hash:
            duplicates += 1
        else:
            conflicts.append(index)
    return unique, duplicates, conflicts
