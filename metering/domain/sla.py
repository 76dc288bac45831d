"""SLA uptime per tenant and UTC month (kpis.md section 3b). Pure, no Django. The credits
an uptime earns are contract terms: billing.domain.credits.

``uptime = 1 - D / (M - W)`` in seconds: M is the period's length (the elapsed part
month-to-date), W the union of the maintenance windows announced before they started
(``announced_at < starts_at``), D the downtime outside W,
weighted at each instant by the highest impact among the active incidents.

The caller passes only the incidents that touch the tenant (``incident_touches``)
and the maintenance windows on deployments the tenant used (``maintenance_touches``).
Seconds are exact ``Decimal``; uptime is an exact ``Fraction`` (``None`` when
M - W is zero, as every ratio with a zero denominator), so credit tier edges
such as 0.999 compare exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from itertools import pairwise
from types import MappingProxyType


class Impact(StrEnum):
    MAJOR_OUTAGE = "major_outage"
    PARTIAL_OUTAGE = "partial_outage"
    DEGRADED = "degraded"


# Share of an instant that counts as down while an incident of this impact is active.
IMPACT_WEIGHTS: Mapping[Impact, Decimal] = MappingProxyType(
    {
        Impact.MAJOR_OUTAGE: Decimal(1),
        Impact.PARTIAL_OUTAGE: Decimal("0.3"),
        Impact.DEGRADED: Decimal(0),
    }
)


_MICROSECOND = timedelta(microseconds=1)


def _utc(name: str, value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware (UTC), got {value!r}")
    return value.astimezone(UTC)


def _seconds(delta: timedelta) -> Decimal:
    """Exact seconds of a timedelta (microsecond resolution)."""
    whole, micro = divmod(delta // _MICROSECOND, 10**6)
    return Decimal(whole) + Decimal(micro).scaleb(-6) if micro else Decimal(whole)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImpactChange:
    """An incident update that set its impact from `time` on."""

    time: datetime
    impact: Impact

    def __post_init__(self) -> None:
        object.__setattr__(self, "impact", Impact(self.impact))


@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentTimeline:
    """An incident's life: `impact` from started_at, changed by updates; ongoing if unresolved.

    At an instant the impact is the one set by the latest change at or before it (the
    opening impact before any change); changes at the same time apply in list order,
    so the last listed wins. Changes at or before started_at replace the opening impact.
    """

    started_at: datetime
    resolved_at: datetime | None  # None: ongoing, counted until now or the month's end
    impact: Impact
    changes: tuple[ImpactChange, ...] = ()

    def __post_init__(self) -> None:
        start = _utc("started_at", self.started_at)
        object.__setattr__(self, "impact", Impact(self.impact))
        if self.resolved_at is not None and _utc("resolved_at", self.resolved_at) < start:
            raise ValueError("resolved_at must not precede started_at")
        object.__setattr__(self, "changes", tuple(self.changes))
        for change in self.changes:
            _utc("change time", change.time)

    def segments(self, *, until: datetime) -> list[tuple[datetime, datetime, Impact]]:
        """Half-open [start, end) pieces of constant impact, up to resolved_at or `until`."""
        start = self.started_at.astimezone(UTC)
        end = until if self.resolved_at is None else min(self.resolved_at.astimezone(UTC), until)
        impact = self.impact
        points: list[tuple[datetime, Impact]] = []
        for change in sorted(self.changes, key=lambda c: c.time.astimezone(UTC)):
            when = change.time.astimezone(UTC)
            if when <= start:
                impact = change.impact
            else:
                points.append((when, change.impact))
        pieces = []
        cursor = start
        for when, next_impact in points:
            if when >= end:
                break
            if when > cursor:
                pieces.append((cursor, when, impact))
            cursor, impact = when, next_impact
        if end > cursor:
            pieces.append((cursor, end, impact))
        return pieces


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintenanceInterval:
    """Maintenance [starts_at, ends_at), told to tenants at `announced_at`: excluded from
    uptime's both terms only when announced before it started (kpis.md 3b)."""

    announced_at: datetime
    starts_at: datetime
    ends_at: datetime

    def __post_init__(self) -> None:
        if _utc("ends_at", self.ends_at) < _utc("starts_at", self.starts_at):
            raise ValueError("ends_at must not precede starts_at")
        _utc("announced_at", self.announced_at)

    @property
    def is_announced_in_advance(self) -> bool:
        return self.announced_at < self.starts_at


@dataclass(frozen=True, slots=True, kw_only=True)
class UptimeResult:
    """Uptime of one tenant-month; seconds exact, uptime None when M - W is zero."""

    period_start: datetime
    period_end: datetime  # month_end, or `now` month-to-date
    is_month_to_date: bool
    month_seconds: Decimal  # M: seconds of [period_start, period_end)
    maintenance_seconds: Decimal  # W: union of maintenance windows inside the period
    downtime_seconds: Decimal  # D: impact-weighted incident seconds outside W
    uptime: Fraction | None  # 1 - D / (M - W)


def uptime_compute(
    *,
    month_start: datetime,
    month_end: datetime,
    now: datetime | None = None,
    incidents: Iterable[IncidentTimeline],
    maintenance_windows: Iterable[MaintenanceInterval],
) -> UptimeResult:
    """Uptime over [month_start, month_end), or month-to-date up to `now` inside it."""
    start = _utc("month_start", month_start)
    month_stop = _utc("month_end", month_end)
    if month_stop <= start:
        raise ValueError("month_end must follow month_start")
    end = month_stop if now is None else min(max(_utc("now", now), start), month_stop)

    def clip(a: datetime, b: datetime) -> tuple[datetime, datetime] | None:
        a, b = max(a, start), min(b, end)
        return (a, b) if a < b else None

    windows = [
        span
        for w in maintenance_windows
        if w.is_announced_in_advance
        and (span := clip(w.starts_at.astimezone(UTC), w.ends_at.astimezone(UTC)))
    ]
    pieces = [
        (*span, IMPACT_WEIGHTS[impact])
        for incident in incidents
        for a, b, impact in incident.segments(until=end)
        if (span := clip(a, b))
    ]
    # Between consecutive boundaries nothing starts or stops, so one weight holds.
    boundaries = sorted(
        {start, end}
        | {t for span in windows for t in span}
        | {t for a, b, _ in pieces for t in (a, b)}
    )
    maintenance = Decimal(0)
    downtime = Decimal(0)
    for a, b in pairwise(boundaries):
        length = _seconds(b - a)
        if any(w_start <= a and b <= w_end for w_start, w_end in windows):
            maintenance += length
            continue
        weight = max((w for p_start, p_end, w in pieces if p_start <= a and b <= p_end), default=0)
        downtime += weight * length

    month_seconds = _seconds(end - start)
    serviceable = month_seconds - maintenance
    uptime = 1 - Fraction(downtime) / Fraction(serviceable) if serviceable else None
    return UptimeResult(
        period_start=start,
        period_end=end,
        is_month_to_date=end < month_stop,
        month_seconds=month_seconds,
        maintenance_seconds=maintenance,
        downtime_seconds=downtime,
        uptime=uptime,
    )


def incident_touches(
    *,
    incident_tenants: Iterable[str],
    incident_deployments: Iterable[str],
    tenant: str,
    deployments_used: Iterable[str],
) -> bool:
    """Whether an incident touches a tenant: tenants empty or naming it, and deployments
    empty or naming one the tenant used that month."""
    tenants = set(incident_tenants)
    deployments = set(incident_deployments)
    return (not tenants or tenant in tenants) and (
        not deployments or not deployments.isdisjoint(deployments_used)
    )


def maintenance_touches(
    *, window_deployments: Iterable[str], deployments_used: Iterable[str]
) -> bool:
    """Whether a maintenance window counts for a tenant: it names a deployment the tenant
    used that month (an empty list means every deployment, as for incidents)."""
    deployments = set(window_deployments)
    return not deployments or not deployments.isdisjoint(deployments_used)
