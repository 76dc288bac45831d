"""The payload hash of a usage event: same (source, id) with another hash is a conflict.

Pure Python, no Django; built from stdlib formatting only, so stored hashes survive
library upgrades.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from hashlib import blake2b

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_MICROSECOND = timedelta(microseconds=1)


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
    # Positional on purpose: EventIn calls it for every event of every request.
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
            *(() if requests == 1 else (str(requests),)),
            # "p:" keeps a project apart from a count of requests (digits alone)
            *(() if project is None else (f"p:{project}",)),
            *(() if service_tier == "standard" else ("tier", service_tier)),
        )
    )
    return blake2b(canonical.encode(), digest_size=16, person=b"usage-event-v1").hexdigest()


def classes_hash(base: str, cache_write_tokens: int, reasoning_tokens: int) -> str:
    """The hash of an event with token classes (kpis.md section 3): its ``fields_hash``
    (``base``) extended by them. An event without classes keeps ``base``, so the hashes of
    events stored before the classes existed still match their replays."""
    canonical = "\x1f".join(("v1", base, str(cache_write_tokens), str(reasoning_tokens)))
    return blake2b(canonical.encode(), digest_size=16, person=b"usage-classes-v1").hexdigest()
