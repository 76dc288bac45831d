"""A pool's reservation figures summed without walking the hours (pool_totals, what the
reservations list shows) equal the sums of the hour-by-hour figures (reservation_figures,
what the utilization API and the detail page show), and the GPU-seconds by hour equal the
hours' own: on a pool of two reservations with a rise and a cancellation inside an hour, a
deployment version that changes inside an hour (and none before 01:00), covered usage in
hours one or both hold and a range that ends inside the running hour."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest

from billing.domain.reservations import (
    GpusFrom,
    ReservationTerms,
    hours_by_version,
    pool_totals,
    reservation_figures,
)
from portal.effective import InForce

D = Decimal
HOUR = timedelta(hours=1)
DEPLOYMENT = "llama@h100"


def at(hour: int, minute: int = 0, second: int = 0, day: int = 2) -> datetime:
    return datetime(2026, 3, day, hour, minute, second, tzinfo=UTC)


@dataclass(frozen=True)
class Version:
    effective_from: datetime
    r_ref: Decimal
    w_in: Decimal


class Versions:
    """The deployment's versions: 2,500 tok/s per GPU from 01:00 (none before), 3,125.5
    from 12:40 (so from the 13:00 hour on); a VersionRuns."""

    def __init__(self) -> None:
        self.series = InForce(
            [Version(at(1), D(2500), D("0.25")), Version(at(12, 40), D("3125.5"), D("0.3"))]
        )

    def __call__(self, deployment: str, hour: datetime, /) -> tuple[Decimal, Decimal] | None:
        version = self.series.at(hour)
        return None if version is None else (version.r_ref, version.w_in)

    def runs(self, deployment: str, start: datetime, end: datetime):
        for hour, until, version in hours_by_version(self.series, start, end):
            yield hour, until, None if version is None else (version.r_ref, version.w_in)


# 2 GPUs at 4.00 from 00:00, 5 from 10:30 (inside the hour: the 10:00 hour keeps 2, as
# `hours` reads the GPUs at each hour's start), cancelled at 16:20:07.
FIRST = ReservationTerms(
    id=1,
    deployment=DEPLOYMENT,
    hourly_rate=D("4.00"),
    starts_at=at(0),
    ends_at=at(16, 20, 7),
    gpus=(GpusFrom(at(0), 2), GpusFrom(at(10, 30), 5)),
)
# 3 GPUs at 2.75 from 08:00, 4 from 18:00, held on past the range.
SECOND = ReservationTerms(
    id=2,
    deployment=DEPLOYMENT,
    hourly_rate=D("2.75"),
    starts_at=at(8),
    ends_at=None,
    gpus=(GpusFrom(at(8), 3), GpusFrom(at(18), 4)),
)
# The pool's covered tok and realized amount per hour: before any version (00:00), the
# first alone (05:00), both (09:00, 12:00, 13:00, the cancellation's 16:00), the second
# alone (19:00) and the running hour (20:00).
COVERED = {
    at(0): (Fraction(7_000), Fraction("1.25")),
    at(5): (Fraction(12_000_250, 4), Fraction("3.10")),
    at(9): (Fraction(30_000_000), Fraction("21.50")),
    at(12): (Fraction(41_000_000), Fraction("19.99")),
    at(13): (Fraction(5_300_001, 10), Fraction("0.07")),
    at(16): (Fraction(9_999_999), Fraction("8.40")),
    at(19): (Fraction(1), Fraction("0.01")),
    at(20): (Fraction(2_500_000), Fraction("2.00")),
}


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (at(0), at(20, 30, 15)),  # ends inside the running hour
        (at(0), at(0, day=3)),
        (at(11), at(16, 10)),  # ends inside the cancellation's hour, before it
        (at(17), at(0, day=3)),  # after the first's end: the second alone
        (at(0, day=1), at(2)),  # before the pool and before the first version
    ],
)
def test_the_totals_equal_the_hours_summed(start, end):
    versions = Versions()
    pooled = [FIRST, SECOND]
    totals = pool_totals(pooled, versions=versions, covered=COVERED, start=start, end=end)
    for reservation in pooled:
        hours = reservation_figures(
            reservation,
            pooled=pooled,
            version_at=versions,
            covered=COVERED,
            start=start,
            end=end,
        )
        assert totals[reservation.id] == (sum(hours[1:], hours[0]) if hours else None)


def test_the_runs_are_the_hours_and_the_totals_by_hand():
    versions = Versions()
    for reservation in (FIRST, SECOND):
        walked = [(h.hour, h.gpus, h.seconds) for h in reservation.hours(at(0), at(20, 30))]
        runs = [
            (run.start + n * HOUR, run.gpus, run.seconds)
            for run in reservation.hour_runs(at(0), at(20, 30))
            for n in range(run.hours)
        ]
        assert runs == walked
    totals = pool_totals([FIRST], versions=versions, covered={}, start=at(0), end=at(20))
    # From 01:00 (a version): 10 hours of 2 GPUs (to the 10:00 hour), 5 of 5 and 1,207 s of
    # the 16:00 hour.
    gpu_seconds = 10 * 2 * 3600 + 5 * 5 * 3600 + 5 * 1207
    assert totals[1].start == at(1)
    assert totals[1].fee == Fraction(gpu_seconds * 4, 3600)
    # R_ref 2,500 through the 12:00 hour (10 hours of 2 GPUs, 2 of 5), 3,125.5 after.
    early = 10 * 2 * 3600 + 2 * 5 * 3600
    assert totals[1].cap == early * 2500 + (gpu_seconds - early) * Fraction("3125.5")
    assert (totals[1].covered, totals[1].covered_realized) == (0, 0)


def test_the_gpu_seconds_by_hour_are_the_hours_own():
    """Each hour's part inside [start, end), a rise inside an hour splitting it."""
    start, end = at(3, 15), at(16, 50)
    by_hour: dict[datetime, int] = {}
    for hour, gpu_seconds in FIRST.gpu_seconds_by_hour(start, end):
        by_hour[hour] = by_hour.get(hour, 0) + gpu_seconds
    walked = {
        h.hour: FIRST.gpu_seconds(max(h.hour, start), min(h.hour + HOUR, end))
        for h in FIRST.hours(at(3), at(17))
    }
    assert by_hour == walked
    assert by_hour[at(3)] == 2 * 45 * 60 and by_hour[at(10)] == 2 * 1800 + 5 * 1800
    assert by_hour[at(16)] == 5 * 1207
