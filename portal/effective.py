"""Which version of an effective-dated series is in force at an instant (kpis.md, general
rules: "the version in force at an event's time applies to it"): the one answer, for every
series (prices, contracts, promotions, deployment versions, cost models, factory costs,
levers, goals). Pure Python, so the domain rules use it too; the callers load the versions
(portal.versions writes them)."""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator
from datetime import datetime
from operator import attrgetter
from typing import Generic, TypeVar

V = TypeVar("V")
K = TypeVar("K", bound=Hashable)

_EFFECTIVE_FROM = attrgetter("effective_from")


class InForce(Generic[V]):
    """The versions of one series in order of `effective_from`: the one in force at t is the
    latest that starts at or before t (None before the first)."""

    def __init__(
        self,
        versions: Iterable[V],
        *,
        start: Callable[[V], datetime] = _EFFECTIVE_FROM,
    ) -> None:
        self.versions: list[V] = sorted(versions, key=start)
        self.starts: list[datetime] = [start(v) for v in self.versions]

    def at(self, moment: datetime) -> V | None:
        index = bisect_right(self.starts, moment)
        return self.versions[index - 1] if index else None

    def next_start(self, moment: datetime) -> datetime | None:
        """When the version in force at `moment` stops being in force: the start of the next
        version after `moment` (None: none follows)."""
        index = bisect_right(self.starts, moment)
        return self.starts[index] if index < len(self.starts) else None

    def spans(self) -> Iterator[tuple[datetime, datetime | None, V]]:
        """Each version with the span it is in force: (start, end or None, version)."""
        ends: list[datetime | None] = [*self.starts[1:], None]
        yield from zip(self.starts, ends, self.versions, strict=True)

    def latest(self) -> V | None:
        return self.versions[-1] if self.versions else None

    def __iter__(self) -> Iterator[V]:
        return iter(self.versions)

    def __len__(self) -> int:
        return len(self.versions)


def in_force_by(
    versions: Iterable[V],
    *,
    series: Callable[[V], K],
    start: Callable[[V], datetime] = _EFFECTIVE_FROM,
) -> dict[K, InForce[V]]:
    """Versions of several series (e.g. one per deployment, per tenant or per model and token
    class), each series' `InForce`, keyed by `series`."""
    grouped: dict[K, list[V]] = defaultdict(list)
    for version in versions:
        grouped[series(version)].append(version)
    return {key: InForce(group, start=start) for key, group in grouped.items()}
