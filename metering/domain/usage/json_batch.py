"""The fast path: a JSON batch of valid events decoded straight into typed structs."""

from __future__ import annotations

from datetime import UTC, datetime
from math import copysign
from typing import Annotated, Final, Literal

import msgspec
from msgspec import UNSET

from metering.domain.usage.fields import (
    ID_MAX_LENGTH,
    MAX_LATENCY_MS,
    MAX_REQUESTS,
    MAX_TOKENS,
    PROJECT_MAX_LENGTH,
    SLUG,
    SLUG_MAX_LENGTH,
    STANDARD,
    EventIn,
    ServiceTier,
    model_problem,
    time_window,
)

# The fast path: a JSON array of events decoded straight into typed structs (in C), for
# batches where every event is valid. Every constraint here is one validate_events also
# applies, so any event it accepts, validate_events accepts with the same values; whatever
# it refuses goes to validate_events, which names every error.
# Ids, sources and slugs: their lengths here, their characters checked after decoding (a
# pattern here is a call of Python's re for every value; a batch has few distinct slugs
# and sources, each checked once, and an id is checked by two str methods).
_AsciiId = Annotated[str, msgspec.Meta(min_length=1, max_length=ID_MAX_LENGTH)]

_Slug = Annotated[str, msgspec.Meta(max_length=SLUG_MAX_LENGTH)]

_Project = Annotated[str, msgspec.Meta(max_length=PROJECT_MAX_LENGTH)]

_Tokens = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKENS)]

_Requests = Annotated[int, msgspec.Meta(ge=1, le=MAX_REQUESTS)]

_Latency = Annotated[float, msgspec.Meta(ge=0, le=MAX_LATENCY_MS)]


class _JsonEvent(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    id: _AsciiId
    time: str  # its shape checked once parsed (_rfc3339_shaped)
    tenant: _Slug
    model: str
    input_tokens: _Tokens
    output_tokens: _Tokens
    source: _AsciiId | None = None
    pool: _Slug | None = None
    cached_tokens: _Tokens | msgspec.UnsetType = msgspec.UNSET  # null is refused
    cache_write_tokens: _Tokens | msgspec.UnsetType = msgspec.UNSET
    reasoning_tokens: _Tokens | msgspec.UnsetType = msgspec.UNSET
    ttft_ms: _Latency | None = None
    tpot_ms: _Latency | None = None
    latency_ms: _Latency | None = None
    status: Literal["ok", "error"] | None = None
    requests: _Requests | None = None
    project: _Project | None = None
    service_tier: ServiceTier | None = None


_JSON_BATCH = msgspec.json.Decoder(list[_JsonEvent])

_UTF8_BOM: Final = b"\xef\xbb\xbf"


def _rfc3339_shaped(text: str) -> bool:
    """Whether a time, once datetime.fromisoformat parses it, is one parse_time reads as it is:
    YYYY-MM-DDTHH:MM:SS, an optional fraction of 1 to 9 digits, then "Z" or ±HH:MM (an
    upper-case "T" and "Z": no upper() first). fromisoformat has checked the digits; it also
    reads other ISO 8601 forms ("+0100", "+01", ",5", a bare ".", any separator), which this
    leaves to the full path. Positions, not a pattern: a pattern is a call of Python's re
    for every event (half the decoding's CPU)."""
    n = len(text)
    if n < 20 or text[10] != "T" or text[4] != "-" or text[7] != "-":
        return False
    if text[13] != ":" or text[16] != ":":
        return False
    if text[-1] == "Z":
        zone = n - 1
    elif text[-6] in "+-" and text[-3] == ":":
        zone = n - 6
    else:
        return False
    return zone == 19 or (text[19] == "." and 21 <= zone <= 29)


def validate_json_batch(
    *, data: bytes, now: datetime, max_events: int, default_source: str = "default"
) -> list[EventIn] | None:
    """The events of a decompressed JSON array when every one of them is valid, else None.

    A shortcut for the common case, with the results of ``decode_batch`` followed by
    ``validate_events``: None (any error, more than ``max_events``, anything unusual) means
    "take that path", which reports every error exactly."""
    window = time_window(now=now)
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    try:
        decoded = _JSON_BATCH.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    if len(decoded) > max_events:
        return None
    slugs = {item.tenant for item in decoded}
    slugs.update(
        {item.pool for item in decoded if item.pool is not None},
        {item.project for item in decoded if item.project is not None},
    )
    if not all(map(SLUG.fullmatch, slugs)):
        return None
    sources = {item.source for item in decoded if item.source is not None}
    if not all(source.isascii() and source.isprintable() for source in sources):
        return None
    earliest, latest = window.earliest, window.latest
    fromisoformat = datetime.fromisoformat
    shaped = _rfc3339_shaped
    models: dict[str, bool] = {}
    events: list[EventIn] = []
    append = events.append
    for item in decoded:
        event_id = item.id
        if not (event_id.isascii() and event_id.isprintable()):
            return None
        # parse_time's result for the times it reads as they are
        text = item.time
        if not shaped(text):
            return None
        try:
            time = fromisoformat(text)
            if time.tzinfo is not UTC:
                time = time.astimezone(UTC)
        except (ValueError, OverflowError):  # month 13, second 60, offset 24:00...
            return None
        if not earliest <= time <= latest:
            return None
        model = item.model
        if model not in models:
            models[model] = model_problem(model) is None
        if not models[model]:
            return None
        input_tokens, output_tokens = item.input_tokens, item.output_tokens
        cached_tokens = item.cached_tokens
        if cached_tokens is UNSET:
            cached_tokens = 0
        elif cached_tokens > input_tokens:
            return None
        cache_write_tokens = item.cache_write_tokens
        if cache_write_tokens is UNSET:
            cache_write_tokens = 0
        elif cache_write_tokens > input_tokens - cached_tokens:
            return None
        reasoning_tokens = item.reasoning_tokens
        if reasoning_tokens is UNSET:
            reasoning_tokens = 0
        elif reasoning_tokens > output_tokens:
            return None
        ttft_ms, tpot_ms, latency_ms = item.ttft_ms, item.tpot_ms, item.latency_ms
        # -0.0 (from "-0" or "-0.0": validate_events tells them apart); _Latency bounds the rest
        if (
            (ttft_ms == 0.0 and copysign(1.0, ttft_ms) < 0)
            or (tpot_ms == 0.0 and copysign(1.0, tpot_ms) < 0)
            or (latency_ms == 0.0 and copysign(1.0, latency_ms) < 0)
        ):
            return None
        source, status, requests = item.source, item.status, item.requests
        service_tier = item.service_tier
        append(
            EventIn(  # by position, in the order of EventIn's fields (its docstring)
                default_source if source is None else source,  # source
                event_id,
                time,
                item.tenant,
                model,
                item.pool,
                input_tokens,
                cached_tokens,
                output_tokens,
                ttft_ms,
                tpot_ms,
                latency_ms,
                "ok" if status is None else status,  # status
                1 if requests is None else requests,  # requests
                cache_write_tokens,
                reasoning_tokens,
                STANDARD if service_tier is None else service_tier,  # service_tier
                item.project,
            )
        )
    return events
