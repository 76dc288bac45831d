"""The payload hash of a usage event: same (source, id) with another hash is a conflict.

Pure Python, no Django; built from stdlib formatting only, so stored hashes survive
library upgrades.
"""

from __future__ import annotations

from datetime import UTC, datetime
from hashlib import blake2b

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# The keyed hashers, copied for each event (cheaper than making one).
_FIELDS = blake2b(digest_size=16, person=b"usage-event-v1")

_CLASSES = blake2b(digest_size=16, person=b"usage-classes-v1")


def fields_hash(
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
    requests: int = 1,
    project: str | None = None,
    service_tier: str = "standard",
) -> str:
    """The hash of already validated, normalised fields (time in UTC, latencies float).
    ``requests`` enters only when it is not 1, ``project`` only when set and
    ``service_tier`` only when it is not ``standard``, so the hashes of events stored before
    those fields existed still match their replays."""
    # Positional on purpose: EventIn calls it for every event of every request. One f-string
    # (the fields' str() and repr(), as joined before) and a copy of a keyed hasher: a
    # quarter less CPU than a tuple joined and a hasher made afresh.
    # "\x1f" cannot occur in a valid field, and "" is no valid value, so None -> "".
    since = time - _EPOCH  # whole microseconds, as (time - _EPOCH) // 1 µs, exactly
    micros = (since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds
    canonical = (
        f"v1\x1f{source}\x1f{event_id}\x1f{micros}\x1f{tenant}\x1f{model}\x1f{pool or ''}"
        f"\x1f{input_tokens}\x1f{cached_tokens}\x1f{output_tokens}"
        f"\x1f{'' if ttft_ms is None else repr(ttft_ms)}"
        f"\x1f{'' if tpot_ms is None else repr(tpot_ms)}"
        f"\x1f{'' if latency_ms is None else repr(latency_ms)}\x1f{status}"
    )
    if requests != 1:
        canonical += f"\x1f{requests}"
    if project is not None:  # "p:" keeps a project apart from a count of requests (digits)
        canonical += f"\x1fp:{project}"
    if service_tier != "standard":
        canonical += f"\x1ftier\x1f{service_tier}"
    hasher = _FIELDS.copy()
    hasher.update(canonical.encode())
    return hasher.hexdigest()


def classes_hash(base: str, cache_write_tokens: int, reasoning_tokens: int) -> str:
    """The hash of an event with token classes (kpis.md section 3): its ``fields_hash``
    (``base``) extended by them. An event without classes keeps ``base``, so the hashes of
    events stored before the classes existed still match their replays."""
    hasher = _CLASSES.copy()
    hasher.update(f"v1\x1f{base}\x1f{cache_write_tokens}\x1f{reasoning_tokens}".encode())
    return hasher.hexdigest()
