"""Reservations: dedicated capacity on one deployment (kpis.md 3d). Pure Python, no Django.

A reservation holds `gpus` GPUs of its deployment's pool from `starts_at` to `ends_at` (none:
until cancelled) at `hourly_rate` per GPU-hour; its GPUs may rise from a whole hour on (a
new version), never fall. For each UTC hour h, with t the seconds of h inside [starts_at,
ends_at):

    cap(r, h) = gpus × R_ref(d, the version in force at h's start) × t     (tok)
    fee(r, h) = gpus × hourly_rate × t / 3600

Rating covers a tenant's ok events on d in h while their running Σ tok(e) stays within the
sum of its reservations' caps there (`Coverage`, pooled), and bills each reservation's fees
of a month on one `reservation` line (`reservation_lines`). Decisions where kpis.md is
silent:
- `starts_at` and a rise's `effective_from` are whole UTC hours (every effective-dated
  start is); a `none` reservation's cancellation may fall inside an hour (whole seconds):
  its last hour counts the seconds before it.
- A reservation's figures per hour when several of a tenant's share a deployment (coverage
  is pooled): its covered tokens are the pool's in proportion to its cap, its covered
  realized amount in proportion to its fee, so each reservation's figures sum to the
  pool's.
- The line's quantity is its GPU-hours rounded to 6 decimals (to the second of a GPU); its
  amount is the exact sum of its fees, rounded once.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from itertools import pairwise
from math import lcm
from typing import Protocol, TypeVar

from billing.domain.rating.types import InvoiceLine, LineKind
from portal.effective import InForce
from portal.errors import FieldError
from portal.formatting import decimal_plain
from portal.money import fraction_to_decimal, round_half_up, round_money

V = TypeVar("V")

HOUR = timedelta(hours=1)
SECONDS_PER_HOUR = 3600
GPU_HOURS_QUANTUM = Decimal("0.000001")

# A reservation's term: how many calendar months it runs from its start (none: until
# cancelled).
TERMS: dict[str, int] = {"none": 0, "1m": 1, "6m": 6, "12m": 12}
NONE = "none"


class ReservationConflict(FieldError):
    """A change the reservation's terms refuse (lowering its GPUs, cancelling a term before
    its end, more GPUs than the pool has): a 409 naming the field."""

    http_status = 409


@dataclass(frozen=True, slots=True)
class GpusFrom:
    """The reservation's GPUs from `effective_from` (a whole UTC hour) on."""

    effective_from: datetime
    gpus: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReservationTerms:
    """A reservation as rating and its figures read it. `gpus`: its versions in time order,
    the first at `starts_at`."""

    id: int
    deployment: str  # slug
    hourly_rate: Decimal  # money per GPU-hour
    starts_at: datetime
    ends_at: datetime | None
    gpus: tuple[GpusFrom, ...]

    def __post_init__(self) -> None:
        if not self.gpus or self.gpus[0].effective_from != self.starts_at:
            raise ValueError("a reservation's first GPUs start at its start")
        counts = [version.gpus for version in self.gpus]
        if counts != sorted(counts) or counts[0] <= 0:
            raise ValueError("a reservation's GPUs are positive and never fall")

    def gpus_at(self, moment: datetime) -> int:
        """The GPUs reserved at `moment` (0 outside [starts_at, ends_at))."""
        if moment < self.starts_at or (self.ends_at is not None and moment >= self.ends_at):
            return 0
        gpus = 0
        for version in self.gpus:
            if version.effective_from <= moment:
                gpus = version.gpus
        return gpus

    def gpu_seconds(self, start: datetime, end: datetime) -> int:
        """Σ gpus × seconds held over [start, end), version by version (the sum of its
        hours' `gpu_seconds`, without walking them)."""
        return sum(gpus * _seconds(begin, finish) for begin, finish, gpus in self.held(start, end))

    def held(self, start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime, int]]:
        """The parts of [start, end) it holds GPUs in, one a version: (begin, finish, gpus)."""
        for version, after in zip(self.gpus, (*self.gpus[1:], None), strict=True):
            begin = max(start, version.effective_from)
            bounds = [end, *((after.effective_from,) if after else ()), self.ends_at or end]
            finish = min(bounds)
            if finish > begin:
                yield begin, finish, version.gpus

    def gpu_seconds_by_hour(self, start: datetime, end: datetime) -> Iterator[tuple[datetime, int]]:
        """Its `gpu_seconds` over each UTC hour's part inside [start, end) (a bound may cut
        an hour), in time order, version by version (an hour a rise splits comes twice)."""
        for begin, finish, gpus in self.held(start, end):
            hour = _hour_floor(begin)
            if hour < begin:  # the part of the first hour
                yield hour, gpus * _seconds(begin, min(hour + HOUR, finish))
                hour += HOUR
            whole = gpus * SECONDS_PER_HOUR
            while hour + HOUR <= finish:
                yield hour, whole
                hour += HOUR
            if hour < finish:  # the part of the last hour
                yield hour, gpus * _seconds(hour, finish)

    def hours(self, start: datetime, end: datetime) -> Iterator[ReservedHour]:
        """Each UTC hour of [start, end) the reservation holds some of (start and end whole
        hours): its GPUs and the seconds it holds them."""
        first = max(start, _hour_floor(self.starts_at))
        last = end if self.ends_at is None else min(end, self.ends_at)
        hour = first
        while hour < last:
            begin = max(hour, self.starts_at)
            finish = min(hour + HOUR, self.ends_at or hour + HOUR)
            seconds = int((finish - begin).total_seconds())
            gpus = self.gpus_at(begin)
            if seconds > 0 and gpus:
                yield ReservedHour(self, hour, gpus, seconds)
            hour += HOUR

    def hour_runs(self, start: datetime, end: datetime) -> Iterator[HourRun]:
        """`hours(start, end)` in runs of consecutive hours that share their GPUs and seconds
        (a rise, the first and the last hour begin one): the same hours, not walked."""
        first = max(start, _hour_floor(self.starts_at))
        last = end if self.ends_at is None else min(end, self.ends_at)
        if first >= last:
            return
        stop = _aligned_ceil(last, first)
        cuts = {first, first + HOUR, stop}
        if self.ends_at is not None:
            cuts.add(stop - HOUR)  # the hour holding `last`, which may end inside it
        cuts.update(_aligned_ceil(version.effective_from, first) for version in self.gpus[1:])
        bounds = sorted(cut for cut in cuts if first <= cut <= stop)
        for hour, after in pairwise(bounds):
            begin = max(hour, self.starts_at)
            finish = min(hour + HOUR, self.ends_at or hour + HOUR)
            seconds = _seconds(begin, finish)
            gpus = self.gpus_at(begin)
            if seconds > 0 and gpus:
                yield HourRun(hour, (after - hour) // HOUR, gpus, seconds)


@dataclass(frozen=True, slots=True)
class HourRun:
    """Consecutive UTC hours from `start` in which a reservation holds `gpus` GPUs for
    `seconds` seconds each."""

    start: datetime
    hours: int
    gpus: int
    seconds: int

    @property
    def end(self) -> datetime:
        return self.start + self.hours * HOUR

    @property
    def gpu_seconds(self) -> int:
        """Of each of its hours."""
        return self.gpus * self.seconds


@dataclass(frozen=True, slots=True)
class ReservedHour:
    """One reservation in one UTC hour: its GPUs and the seconds of the hour it holds."""

    reservation: ReservationTerms
    hour: datetime
    gpus: int
    seconds: int  # t(r, h)

    @property
    def gpu_seconds(self) -> int:
        return self.gpus * self.seconds

    @property
    def fee(self) -> Fraction:
        """gpus × hourly_rate × t / 3600, exact."""
        return Fraction(self.reservation.hourly_rate) * self.gpu_seconds / SECONDS_PER_HOUR

    def cap(self, r_ref: Decimal) -> Decimal:
        """gpus × R_ref × t: the output-token units its GPUs make in the hour at the SLO."""
        return self.gpu_seconds * r_ref


@dataclass(frozen=True, slots=True)
class Coverage:
    """A tenant's reservations on one deployment in one hour, pooled: what rating covers
    (cap, tok) and what they charge (fee), and the deployment's w_in that weighs an event's
    production there (the version in force at the hour's start)."""

    cap: Decimal
    fee: Fraction
    w_in: Decimal


# The deployment version in force at an hour's start: (R_ref, w_in), or None before its first.
VersionAt = Callable[[str, datetime], tuple[Decimal, Decimal] | None]


def hours_by_version(
    series: InForce[V], start: datetime, end: datetime
) -> Iterator[tuple[datetime, datetime, V | None]]:
    """The hours of [start, end) (`start` a whole hour) in runs that share the version of
    `series` in force at their start: (first hour, end, version or None before the first)."""
    hour = start
    while hour < end:
        version, after = series.at(hour), series.next_start(hour)
        until = end if after is None else min(end, _aligned_ceil(after, start))
        yield hour, until, version
        hour = until


class VersionRuns(Protocol):
    """A VersionAt that also gives the hours of [start, end) (whole hours) of a deployment in
    runs that share the version in force at their start: (first hour, end, version)."""

    def __call__(self, deployment: str, hour: datetime, /) -> tuple[Decimal, Decimal] | None: ...

    def runs(
        self, deployment: str, start: datetime, end: datetime
    ) -> Iterable[tuple[datetime, datetime, tuple[Decimal, Decimal] | None]]: ...


def coverage_of(
    reservations: Iterable[ReservationTerms],
    *,
    version_at: VersionAt,
    start: datetime,
    end: datetime,
) -> dict[tuple[str, datetime], Coverage]:
    """One tenant's coverage per (deployment slug, hour) of [start, end): its reservations'
    caps and fees summed. An hour whose deployment has no version then covers nothing."""
    caps: dict[tuple[str, datetime], Decimal] = {}
    fees: dict[tuple[str, datetime], Fraction] = {}
    w_ins: dict[tuple[str, datetime], Decimal] = {}
    for reservation in reservations:
        for held in reservation.hours(start, end):
            version = version_at(reservation.deployment, held.hour)
            if version is None:
                continue
            r_ref, w_in = version
            key = (reservation.deployment, held.hour)
            caps[key] = caps.get(key, Decimal(0)) + held.cap(r_ref)
            fees[key] = fees.get(key, Fraction(0)) + held.fee
            w_ins[key] = w_in
    return {key: Coverage(cap=caps[key], fee=fees[key], w_in=w_ins[key]) for key in caps}


@dataclass(frozen=True, slots=True)
class HourFigures:
    """One reservation's figures over an hour or a day (kpis.md 3d): its cap and the tokens
    it covered (tok), its fees and the covered usage's realized amount (unused = the rest)."""

    start: datetime
    cap: Fraction
    covered: Fraction
    fee: Fraction
    covered_realized: Fraction

    @property
    def unused(self) -> Fraction:
        return self.fee - self.covered_realized

    @property
    def utilization(self) -> Fraction | None:
        return self.covered / self.cap if self.cap else None

    def __add__(self, other: HourFigures) -> HourFigures:
        return HourFigures(
            self.start,
            self.cap + other.cap,
            self.covered + other.covered,
            self.fee + other.fee,
            self.covered_realized + other.covered_realized,
        )


def reservation_figures(
    reservation: ReservationTerms,
    *,
    pooled: Iterable[ReservationTerms],
    version_at: VersionAt,
    covered: Mapping[datetime, tuple[Fraction, Fraction]],
    start: datetime,
    end: datetime,
) -> list[HourFigures]:
    """The reservation's figures per hour of [start, end) it holds GPUs in. `pooled`: its
    tenant's reservations on its deployment (itself among them), whose coverage is pooled;
    `covered`: per hour, the pool's covered tok and covered realized amount. Its share of
    them is its cap's of the pool's, and of its fee's."""
    pool = coverage_of(pooled, version_at=version_at, start=start, end=end)
    figures = []
    for held in reservation.hours(start, end):
        version = version_at(reservation.deployment, held.hour)
        hour = pool.get((reservation.deployment, held.hour))
        if version is None or hour is None:
            continue
        cap = Fraction(held.cap(version[0]))
        tok, realized = covered.get(held.hour, (Fraction(0), Fraction(0)))
        figures.append(
            HourFigures(
                held.hour,
                cap,
                tok * cap / Fraction(hour.cap) if hour.cap else Fraction(0),
                held.fee,
                realized * held.fee / hour.fee if hour.fee else Fraction(0),
            )
        )
    return figures


def pool_totals(
    pooled: Sequence[ReservationTerms],
    *,
    versions: VersionRuns,
    covered: Mapping[datetime, tuple[Fraction, Fraction]],
    start: datetime,
    end: datetime,
) -> dict[int, HourFigures | None]:
    """Per reservation of one tenant's pool on a deployment (`pooled`, as
    `reservation_figures` takes it), the sum of its `reservation_figures` over [start, end)
    (`start` a whole hour), None when it has none; without walking the hours: caps and fees
    by runs of hours sharing GPUs, seconds and version, and each hour of covered usage the
    pool's share of it (all of it to a reservation alone in its pool then)."""
    if start != _hour_floor(start):
        raise ValueError("the totals start at a whole hour")
    if not pooled:
        return {}
    runs = {r.id: list(r.hour_runs(start, end)) for r in pooled}
    stop = max((rs[-1].end for rs in runs.values() if rs), default=start)
    spans = [  # (first hour, end, R_ref) of the runs of hours that have a version
        (begin, finish, version[0])
        for begin, finish, version in versions.runs(pooled[0].deployment, start, stop)
        if version is not None
    ]
    starts = [span[0] for span in spans]
    held = {r.id: (r, [run.start for run in runs[r.id]]) for r in pooled}
    shares: dict[int, tuple[list[Fraction], list[Fraction]]] = {r.id: ([], []) for r in pooled}
    for hour, (tok, realized) in covered.items():
        index = bisect_right(starts, hour) - 1
        if index < 0 or hour >= spans[index][1]:
            continue  # no version then: the hour covers nothing
        r_ref = spans[index][2]
        holding = [
            (r, gpu_seconds)
            for r, run_starts in held.values()
            if (gpu_seconds := _run_gpu_seconds(runs[r.id], run_starts, hour))
        ]
        if len(holding) == 1:  # its cap and fee are the pool's
            reservation = holding[0][0]
            if r_ref:
                shares[reservation.id][0].append(tok)
            if reservation.hourly_rate:
                shares[reservation.id][1].append(realized)
            continue
        caps = {r.id: Fraction(gpu_seconds * r_ref) for r, gpu_seconds in holding}
        fees = {r.id: _fee(r, gpu_seconds) for r, gpu_seconds in holding}
        pool_cap, pool_fee = sum(caps.values(), Fraction(0)), sum(fees.values(), Fraction(0))
        for r, _ in holding:
            shares[r.id][0].append(tok * caps[r.id] / pool_cap if pool_cap else Fraction(0))
            shares[r.id][1].append(realized * fees[r.id] / pool_fee if pool_fee else Fraction(0))
    totals: dict[int, HourFigures | None] = {}
    for reservation in pooled:
        first, cap, gpu_seconds = None, Fraction(0), 0
        for run in runs[reservation.id]:
            for begin, finish, r_ref in spans:
                hours = (min(finish, run.end) - max(begin, run.start)) // HOUR
                if hours > 0:
                    first = first or max(begin, run.start)
                    gpu_seconds += hours * run.gpu_seconds
                    cap += Fraction(r_ref) * hours * run.gpu_seconds
        toks, amounts = shares[reservation.id]
        totals[reservation.id] = (
            None
            if first is None
            else HourFigures(first, cap, _sum(toks), _fee(reservation, gpu_seconds), _sum(amounts))
        )
    return totals


def _run_gpu_seconds(runs: Sequence[HourRun], starts: Sequence[datetime], hour: datetime) -> int:
    """The GPU-seconds of `hour` in the run holding it (0: none holds it)."""
    index = bisect_right(starts, hour) - 1
    return runs[index].gpu_seconds if index >= 0 and hour < runs[index].end else 0


def _fee(reservation: ReservationTerms, gpu_seconds: int) -> Fraction:
    """gpu_seconds × hourly_rate / 3600, exact (ReservedHour.fee of a sum of hours)."""
    return Fraction(reservation.hourly_rate) * gpu_seconds / SECONDS_PER_HOUR


def _sum(values: Sequence[Fraction]) -> Fraction:
    """An exact sum over one common denominator (one Fraction, not one a term)."""
    denominator = lcm(*(value.denominator for value in values)) if values else 1
    return Fraction(
        sum(value.numerator * (denominator // value.denominator) for value in values),
        denominator,
    )


def by_day(figures: Iterable[HourFigures]) -> list[HourFigures]:
    """Hourly figures summed per UTC day (each at its day's start)."""
    days: dict[datetime, HourFigures] = {}
    for hour in figures:
        day = hour.start.replace(hour=0)
        days[day] = days[day] + hour if day in days else replace(hour, start=day)
    return list(days.values())


def reservation_lines(
    reservations: Sequence[ReservationTerms], *, month_start: datetime, month_end: datetime,
    currency: str,
) -> list[InvoiceLine]:  # fmt: skip
    """One `reservation` line per reservation holding GPUs in the month, in the order of
    their ids: quantity its GPU-hours, unit price its hourly rate, amount the sum of its
    fees rounded once."""
    lines = []
    for reservation in sorted(reservations, key=lambda r: r.id):
        gpu_seconds = reservation.gpu_seconds(month_start, month_end)
        if not gpu_seconds:
            continue
        hours = Fraction(gpu_seconds, SECONDS_PER_HOUR)
        amount = round_money(
            amount=fraction_to_decimal(hours * Fraction(reservation.hourly_rate)),
            currency=currency,
        )
        gpu_hours = round_half_up(amount=fraction_to_decimal(hours), quantum=GPU_HOURS_QUANTUM)
        lines.append(
            InvoiceLine(
                kind=LineKind.RESERVATION,
                list_amount=amount,
                discount=amount - amount,
                amount=amount,
                description=(
                    f"Reservation {reservation.id}: {decimal_plain(gpu_hours)} GPU-hours of "
                    f"{reservation.deployment} at {decimal_plain(reservation.hourly_rate)} "
                    "per GPU-hour"
                ),
                list_unit_price=reservation.hourly_rate,
                gpu_hours=gpu_hours,
                reservation=reservation.id,
            )
        )
    return lines


def term_end(starts_at: datetime, term: str) -> datetime | None:
    """When a reservation of `term` that starts at `starts_at` ends: that many calendar
    months later (the same day and hour, or the month's last day when it has no such day);
    None for `none`."""
    months = TERMS[term]
    if not months:
        return None
    index = starts_at.year * 12 + starts_at.month - 1 + months
    year, month = divmod(index, 12)
    day = starts_at.day
    while True:
        try:
            return starts_at.replace(year=year, month=month + 1, day=day)
        except ValueError:  # 31 March + 1 month: 30 April
            day -= 1


def pool_peak(
    reservations: Iterable[ReservationTerms], *, start: datetime, end: datetime | None
) -> tuple[int, datetime | None]:
    """The most GPUs the reservations hold at any instant of [start, end) (end None: on
    and on) and the first instant they do; (0, None) when none holds any."""
    reservations = list(reservations)
    instants = {start}
    for reservation in reservations:
        for moment in (reservation.starts_at, reservation.ends_at):
            if moment is not None:
                instants.add(moment)
        instants.update(version.effective_from for version in reservation.gpus)
    peak, when = 0, None
    for moment in sorted(instants):
        if moment < start or (end is not None and moment >= end):
            continue
        gpus = sum(r.gpus_at(moment) for r in reservations)
        if gpus > peak:
            peak, when = gpus, moment
    return peak, when


def is_whole_hour(moment: datetime) -> bool:
    utc = moment.astimezone(UTC)
    return (utc.minute, utc.second, utc.microsecond) == (0, 0, 0)


def _hour_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _aligned_ceil(moment: datetime, origin: datetime) -> datetime:
    """The first instant at or after `moment` a whole number of hours from `origin`."""
    return origin + HOUR * -((origin - moment) // HOUR)


def _seconds(begin: datetime, finish: datetime) -> int:
    return int((finish - begin).total_seconds())


# Alert kinds (kpis.md 3c, 3d): a tenant's overage on a reserved deployment, a reservation
# used too little.
OVERAGE = "reservation_overage"
UNDERUSED = "reservation_underused"


def _whole(params: dict, name: str, low: int, high: int, default: int) -> int:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise FieldError(f"params.{name}", f"a whole number from {low} to {high}")
    return value


def _known(params: dict, kind: str, names: tuple[str, ...]) -> None:
    if unknown := sorted(set(params) - set(names)):
        raise FieldError(f"params.{unknown[0]}", f"a {kind} rule takes {' and '.join(names)}")


def overage_params_check(params: dict) -> dict:
    """{"percent": 1–1000 (default 20), "hours": 1–168 (default 3)}: the tenant's overage
    tokens (tok) on a reserved deployment above `percent`% of its reservations' capacity in
    each of the last `hours` complete hours."""
    _known(params, OVERAGE, ("percent", "hours"))
    return {
        "percent": _whole(params, "percent", 1, 1000, 20),
        "hours": _whole(params, "hours", 1, 168, 3),
    }


def underused_params_check(params: dict) -> dict:
    """{"percent": 1–100 (default 50), "days": 1–90 (default 7)}: a tenant's utilization of
    its reservations on a deployment below `percent`% over the last `days` days."""
    _known(params, UNDERUSED, ("percent", "days"))
    return {
        "percent": _whole(params, "percent", 1, 100, 50),
        "days": _whole(params, "days", 1, 90, 7),
    }
