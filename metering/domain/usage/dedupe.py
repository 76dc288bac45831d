"""Repeats of a (source, id) inside one validated usage batch. Pure Python, no Django."""

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
