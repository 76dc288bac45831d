"""Repeats of a (source, id) inside one validated usage batch, and against the keys
already stored. Pure Python, no Django."""

from __future__ import annotations

from collections.abc import Sequence

from metering.domain.usage.fields import EventIn


def dedupe_within_batch(*, events: Sequence[EventIn]) -> tuple[list[EventIn], int, list[int]]:
    """Split repeats of a (source, id) inside one valid batch.

    Returns (first occurrences in order, number of later repeats of the first
    (``EventIn.is_replay_of``: the same payload, or the same but for token classes the
    first lacks), indexes of the other repeats). Indexes are positions in ``events``,
    which are batch indexes when validate_events reported no error.
    """
    if len({(event.source, event.id) for event in events}) == len(events):
        return list(events), 0, []  # no key repeated (a gateway's batch)
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
        elif event.is_replay_of(first_hash):
            duplicates += 1
        else:
            conflicts.append(index)
    return unique, duplicates, conflicts


def stored_conflicts(*, events: Sequence[EventIn], stored: dict[tuple[str, str], str]) -> list[int]:
    """The positions in `events` of those whose (source, id) is stored (`stored`: its payload
    hash) with a payload they do not replay (a conflict, 409)."""
    return [
        index
        for index, e in enumerate(events)
        if (e.source, e.id) in stored and not e.is_replay_of(stored[(e.source, e.id)])
    ]
