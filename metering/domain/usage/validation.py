"""Validation item by item, naming every error of every item (the general path)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, cast

from metering.domain.usage.fields import (
    BAD_LATENCY,
    BAD_PROJECT,
    BAD_REQUESTS,
    BAD_SLUG,
    BAD_STATUS,
    BAD_TIER,
    BAD_TOKENS,
    EVENT_FIELDS,
    ID_MAX_LENGTH,
    MAX_LATENCY_MS,
    MAX_REQUESTS,
    MAX_TOKENS,
    NOT_OBJECT,
    NULL_TOKENS,
    PROJECT_MAX_LENGTH,
    REQUIRED,
    SERVICE_TIERS,
    SLUG,
    SLUG_MAX_LENGTH,
    STANDARD,
    TOO_MANY_TOKENS,
    UNKNOWN_FIELD,
    EventError,
    EventIn,
    EventRef,
    TimeWindow,
    model_problem,
    parse_time,
    time_window,
)


def validate_events(
    *, items: Sequence[Any], now: datetime, default_source: str = "default"
) -> tuple[list[EventIn], list[EventError]]:
    """Validate decoded items; return the valid events and every error of every item.

    Each error names the item's index and field (``""`` for an item that is not an
    object; an unknown key is refused with an error naming that key). ``null`` counts as
    absent: required fields then get "is required", optional ones their default
    (source ``default_source``, pool None, latencies None, status "ok", requests 1, project
    None: the tenant's `(none)`, service_tier "standard"; another tier than SERVICE_TIERS is
    refused), except
    the token counts ``cached_tokens``, ``cache_write_tokens`` and ``reasoning_tokens``:
    absent is 0, null is refused (a count, not "unknown"); each is part of another count
    (cached ≤ input, cache-write ≤ input − cached, reasoning ≤ output).
    Integers exclude booleans and floats; latencies (ms) are finite non-negative numbers;
    ``time`` is RFC 3339 with a zone (or an aware datetime) inside ``time_window(now=now)``:
    not before the retention window, at most 5 minutes after ``now``. The batch is
    all-or-nothing, so when errors is not empty the caller rejects it; events then holds
    only the valid items, whose positions no longer match indexes.
    """
    window = time_window(now=now)
    events: list[EventIn] = []
    errors: list[EventError] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            errors.append(EventError(index, "", NOT_OBJECT))
            continue
        event = _validate_item(item, index, window, default_source, errors)
        if event is not None:
            events.append(event)
    return events, errors


def event_references(*, items: Sequence[Any]) -> list[EventRef]:
    """The tenant, model, pool and project references of each object in ``items`` that are
    well-formed, so a batch refused for its field errors also names its unknown tenants,
    models and deployments and the projects past a tenant's limit
    (usage_reference_errors) in the same answer."""
    refs: list[EventRef] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        tenant, model, pool = item.get("tenant"), item.get("model"), item.get("pool")
        tenant = tenant if _is_slug(tenant) else None
        model = model if model_problem(model) is None else None
        is_pool_ok = pool is None or _is_slug(pool)
        project = item.get("project")
        if (
            not (isinstance(project, str) and _is_slug(project))
            or len(project) > PROJECT_MAX_LENGTH
        ):
            project = None
        if tenant is not None or model is not None:
            pool = pool if is_pool_ok else None
            placeable = model is not None and is_pool_ok
            refs.append(EventRef(index, tenant, model, pool, placeable, project))
    return refs


def _is_slug(value: Any) -> bool:
    return type(value) is str and len(value) <= SLUG_MAX_LENGTH and bool(SLUG.fullmatch(value))


def _validate_item(
    item: dict[Any, Any],
    index: int,
    window: TimeWindow,
    default_source: str,
    errors: list[EventError],
) -> EventIn | None:
    # Each check is a fast inline test for the valid case; the helper that words the
    # error runs only on failure (this loop runs for every event of every request).
    error_count = len(errors)
    get: Callable[..., Any] = item.get  # decoded JSON values: Any, null included

    event_id = get("id")
    if not (
        type(event_id) is str
        and 0 < len(event_id) <= ID_MAX_LENGTH
        and event_id.isascii()
        and event_id.isprintable()
    ):
        # The test above failed, so there is a problem to name.
        errors.append(EventError(index, "id", cast(str, _ascii_id_problem(event_id))))

    source = get("source")
    if source is None:
        source = default_source
    elif problem := _ascii_id_problem(source):
        errors.append(EventError(index, "source", problem))

    time, problem = parse_time(get("time"))
    if time is not None and not window.earliest <= time <= window.latest:
        problem = window.problem(time)
        time = None
    if problem:
        errors.append(EventError(index, "time", problem))

    tenant = get("tenant")
    if not (type(tenant) is str and len(tenant) <= SLUG_MAX_LENGTH and SLUG.fullmatch(tenant)):
        errors.append(EventError(index, "tenant", REQUIRED if tenant is None else BAD_SLUG))

    model = get("model")
    if problem := model_problem(model):
        errors.append(EventError(index, "model", problem))

    pool = get("pool")
    if pool is not None and not (
        type(pool) is str and len(pool) <= SLUG_MAX_LENGTH and SLUG.fullmatch(pool)
    ):
        errors.append(EventError(index, "pool", BAD_SLUG))

    input_tokens = get("input_tokens")
    input_ok = type(input_tokens) is int and 0 <= input_tokens <= MAX_TOKENS
    if not input_ok:
        errors.append(EventError(index, "input_tokens", _token_problem(input_tokens)))

    cached_tokens = get("cached_tokens", 0)
    if cached_tokens is None:
        errors.append(EventError(index, "cached_tokens", NULL_TOKENS))
    elif not (type(cached_tokens) is int and 0 <= cached_tokens <= MAX_TOKENS):
        errors.append(EventError(index, "cached_tokens", _token_problem(cached_tokens)))
    elif input_ok and cached_tokens > input_tokens:
        message = f"must not exceed input_tokens ({input_tokens})"
        errors.append(EventError(index, "cached_tokens", message))

    output_tokens = get("output_tokens")
    output_ok = type(output_tokens) is int and 0 <= output_tokens <= MAX_TOKENS
    if not output_ok:
        errors.append(EventError(index, "output_tokens", _token_problem(output_tokens)))

    # Token classes inside the counts (kpis.md section 3): absent is 0, null is refused.
    cache_write_tokens = get("cache_write_tokens", 0)
    if type(cache_write_tokens) is not int or cache_write_tokens:
        uncached = None
        if input_ok and type(cached_tokens) is int and cached_tokens <= input_tokens:
            uncached = input_tokens - cached_tokens
        problem = _class_problem(cache_write_tokens, uncached, "input_tokens - cached_tokens")
        if problem:
            errors.append(EventError(index, "cache_write_tokens", problem))
    reasoning_tokens = get("reasoning_tokens", 0)
    if type(reasoning_tokens) is not int or reasoning_tokens:
        problem = _class_problem(
            reasoning_tokens, output_tokens if output_ok else None, "output_tokens"
        )
        if problem:
            errors.append(EventError(index, "reasoning_tokens", problem))

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
        errors.append(EventError(index, "status", BAD_STATUS))

    requests = get("requests")
    if requests is None:
        requests = 1
    elif not (type(requests) is int and 1 <= requests <= MAX_REQUESTS):
        errors.append(EventError(index, "requests", BAD_REQUESTS))

    project = get("project")
    if project is not None and not (
        type(project) is str and len(project) <= PROJECT_MAX_LENGTH and SLUG.fullmatch(project)
    ):
        errors.append(EventError(index, "project", BAD_PROJECT))
    service_tier = get("service_tier")
    if service_tier is None:
        service_tier = STANDARD
    elif type(service_tier) is not str or service_tier not in SERVICE_TIERS:
        errors.append(EventError(index, "service_tier", BAD_TIER))

    if not item.keys() <= EVENT_FIELDS:
        for key in item:
            if key not in EVENT_FIELDS:
                errors.append(EventError(index, str(key)[:ID_MAX_LENGTH], UNKNOWN_FIELD))

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
        requests=requests,
        cache_write_tokens=cache_write_tokens,
        reasoning_tokens=reasoning_tokens,
        project=project,
        service_tier=service_tier,
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


def _token_problem(value: Any) -> str:
    if value is None:
        return REQUIRED
    if type(value) is not int or value < 0:  # type() also refuses bool
        return BAD_TOKENS
    return TOO_MANY_TOKENS


def _class_problem(value: Any, whole: int | None, whole_name: str) -> str | None:
    """Why a token class count is refused: not a count, or more than the count it is part
    of (`whole`, None when that count is itself refused)."""
    if value is None:
        return NULL_TOKENS
    if not (type(value) is int and 0 <= value <= MAX_TOKENS):
        return _token_problem(value)
    if whole is not None and value > whole:
        return f"must not exceed {whole_name} ({whole})"
    return None


def _latency(value: Any, index: int, field: str, errors: list[EventError]) -> float | None:
    kind = type(value)
    if kind is float:
        if 0.0 <= value <= MAX_LATENCY_MS:  # NaN and infinities fail the comparison
            return value
    elif kind is int and 0 <= value <= MAX_LATENCY_MS:
        return float(value)
    errors.append(EventError(index, field, BAD_LATENCY))
    return None
