"""Validation of decoded usage events: every field checked by hand, pure Python, no Django.

No schema library per event: this runs on every ingest request. ``validate_events``
returns the valid events (with their payload hash) and every error of every item.
Resolving tenant, model and pool slugs against the database is the caller's job.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final, Literal

import msgspec

from metering.ingest.hashing import fields_hash

MAX_TOKENS: Final = 2**31 - 1
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
        payload_hash=fields_hash(
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


# The fast path: a JSON array of events decoded straight into typed structs (in C), for
# batches where every event is valid. Every constraint here is one validate_events also
# applies, so any event it accepts, validate_events accepts with the same values; whatever
# it refuses goes to validate_events, which names every error.
_AsciiId = Annotated[str, msgspec.Meta(pattern=r"^[ -~]+\Z", max_length=ID_MAX_LENGTH)]
_Slug = Annotated[str, msgspec.Meta(pattern=r"^[-a-zA-Z0-9_]+\Z", max_length=SLUG_MAX_LENGTH)]
_Tokens = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKENS)]
_Latency = Annotated[float, msgspec.Meta(ge=0)]
_EXACT_FLOAT_LIMIT: Final = 2.0**53  # larger JSON integers: left to validate_events


class _JsonEvent(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    id: _AsciiId
    time: str
    tenant: _Slug
    model: str
    input_tokens: _Tokens
    output_tokens: _Tokens
    source: _AsciiId | None = None
    pool: _Slug | None = None
    cached_tokens: _Tokens | None = None
    ttft_ms: _Latency | None = None
    tpot_ms: _Latency | None = None
    latency_ms: _Latency | None = None
    status: Literal["ok", "error"] | None = None


_JSON_BATCH = msgspec.json.Decoder(list[_JsonEvent])
_UTF8_BOM: Final = b"\xef\xbb\xbf"


def validate_json_batch(
    *, data: bytes, now: datetime, max_events: int, default_source: str = "default"
) -> list[EventIn] | None:
    """The events of a decompressed JSON array when every one of them is valid, else None.

    A shortcut for the common case, with the results of ``decode_batch`` followed by
    ``validate_events``: None (any error, more than ``max_events``, anything unusual) means
    "take that path", which reports every error exactly."""
    if now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    try:
        decoded = _JSON_BATCH.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    if len(decoded) > max_events:
        return None
    latest = now + FUTURE_TOLERANCE
    models: dict[str, bool] = {}
    events: list[EventIn] = []
    append = events.append
    for item in decoded:
        time, problem = _parse_time(item.time)
        if problem or time > latest:
            return None
        model = item.model
        if model not in models:
            models[model] = _model_problem(model) is None
        if not models[model]:
            return None
        source = default_source if item.source is None else item.source
        cached_tokens = 0 if item.cached_tokens is None else item.cached_tokens
        if cached_tokens > item.input_tokens:
            return None
        ttft_ms, tpot_ms, latency_ms = item.ttft_ms, item.tpot_ms, item.latency_ms
        for value in (ttft_ms, tpot_ms, latency_ms):
            # -0.0 (from "-0" or "-0.0": validate_events tells them apart) and huge values
            if value is not None and not (
                value < _EXACT_FLOAT_LIMIT and math.copysign(1.0, value) > 0
            ):
                return None
        status = "ok" if item.status is None else item.status
        append(
            EventIn(
                source=source,
                id=item.id,
                time=time,
                tenant=item.tenant,
                model=model,
                pool=item.pool,
                input_tokens=item.input_tokens,
                cached_tokens=cached_tokens,
                output_tokens=item.output_tokens,
                ttft_ms=ttft_ms,
                tpot_ms=tpot_ms,
                latency_ms=latency_ms,
                status=status,
                payload_hash=fields_hash(
                    source,
                    item.id,
                    time,
                    item.tenant,
                    model,
                    item.pool,
                    item.input_tokens,
                    cached_tokens,
                    item.output_tokens,
                    ttft_ms,
                    tpot_ms,
                    latency_ms,
                    status,
                ),
            )
        )
    return events


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
