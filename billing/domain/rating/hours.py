"""A tenant-month's rating hour by hour (architecture.md "The pipeline": rating is
incremental). With each hour of rated usage the month's rating keeps where it stands at
the hour's end: the allowance and tier running totals, the realized amount so far (before
promotions), the realized amount before each credit expiry inside the hour, and the hour's
own paid quantities per usage line. Rating again from an hour resumes from the state of
the hour before it; the month's lines and promotions follow from its paid quantities, its
realized amount and the realized amounts before the credits' expiries, as a whole-month
rating gives them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal, localcontext
from typing import cast

from billing.domain.invoices import (
    LineKey,
    MonthLines,
    line_quantities,
    month_lines,
    quantity_lines,
)
from billing.domain.rating.engine import allocate_promotions
from billing.domain.rating.types import (
    ContractVersion,
    InvoiceLine,
    PromotionalCredit,
    RatedItem,
    Running,
    month_bounds,
)
from portal.money import EXACT

ZERO = Decimal(0)
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class HourState:
    """Where a tenant-month's rating stands at the end of one hour with usage."""

    hour: datetime
    running: Running
    realized: Decimal = ZERO  # the month's realized amounts on demand so far, before promotions
    quantities: dict[LineKey, int] = field(default_factory=dict)  # the hour's paid, per line
    cuts: dict[datetime, Decimal] = field(default_factory=dict)  # realized before an instant


@dataclass(frozen=True)
class HourPrefix:
    """Where a tenant-month's rating stands inside a split hour (billing.models.RatedHourPrefix):
    its events up to `at` (inclusive) rated, `state` the state then (its `hour` the hour's
    start, its quantities and cuts the hour's so far), `events` of them with `tokens` (input
    + output) on demand, rated to `cells` (per rated usage cell: tokens, compliant tokens,
    money) and summing to `explained` per rollup row (tokens, requests, compliant tokens),
    while the deployment versions ended at id `versions`. The reservations' capacity on the deployments in `spent` ran out by `at` (kpis.md 3d): their
    covered items are all before it, realized, and every later one is on demand."""

    at: datetime
    state: HourState
    events: int
    tokens: int
    versions: int
    cells: dict[tuple, tuple]  # (project, deployment id, sale, service tier, covered) -> sums
    explained: dict[tuple, tuple[int, ...]]  # (deployment id, service tier, project) -> sums
    spent: frozenset[int] = frozenset()  # covered deployments (ids) whose capacity is spent

    @property
    def hour(self) -> datetime:
        return self.state.hour


def hour_states(
    *,
    items: Sequence[RatedItem],
    opening: HourState | None,
    instants: Iterable[datetime] = (),
    inside: bool = False,
) -> list[HourState]:
    """The state at the end of each hour that has items (in rating order, the month's items
    from some hour on), resuming from `opening`, the state of an earlier hour (None: the
    month's start), or with `inside`, a state inside the first hour (HourPrefix.state: its
    items after it follow, and that hour has a state whether they are any or not).
    `instants` (credit expiries) inside an hour with items get a cut: the realized amount of
    the paid items before them."""
    consumed = opening.running.consumed if opening else 0
    paid = opening.running.paid_tokens if opening else 0
    realized = opening.realized if opening else ZERO
    quantities: dict[LineKey, int] = {}
    pending = sorted(set(instants))
    states: list[HourState] = []
    hour: datetime | None = None
    cuts: dict[datetime, Decimal] = {}
    if inside and opening is not None:
        hour, cuts, quantities = opening.hour, dict(opening.cuts), dict(opening.quantities)
        pending = [instant for instant in pending if instant >= hour and instant not in cuts]

    def close() -> None:
        closing = cast(datetime, hour)  # called once an hour with items has begun
        while pending and pending[0] < closing + HOUR:
            cuts[pending.pop(0)] = realized
        running = Running(consumed=consumed, paid_tokens=paid)
        states.append(HourState(closing, running, realized, quantities, cuts))

    with localcontext(EXACT):
        for rated in items:
            time = rated.item.time
            start = time.replace(minute=0, second=0, microsecond=0)
            if start != hour:
                if hour is not None:
                    close()
                hour, cuts, quantities = start, {}, {}
                while pending and pending[0] < hour:
                    pending.pop(0)  # in an hour without items: the hour before tells
            while pending and pending[0] <= time:
                cuts[pending.pop(0)] = realized
            if rated.covered:  # counts for neither the allowance nor the tiers (kpis.md 3d)
                continue
            tokens = rated.item.total_tokens
            consumed += tokens
            if not rated.is_paid:
                continue
            paid += tokens
            realized += rated.realized_amount
            line_quantities(items=(rated,), into=quantities)
        if hour is not None:
            close()
    return states


class MissingCut(Exception):
    """A credit expires inside an hour whose stored state has no cut for it: the month is
    rated again from its start."""


def realized_before(instant: datetime, states: Sequence[HourState]) -> Decimal:
    """The month's realized amount before `instant`, from states of its hours (in hour
    order; any subset that holds the instant's hour, if it has one, and the latest hour
    with usage before it)."""
    start = instant.replace(minute=0, second=0, microsecond=0)
    before = ZERO
    for state in states:
        if state.hour < start:
            before = state.realized
        elif state.hour == start and instant != start:
            if instant not in state.cuts:
                raise MissingCut(instant)
            return state.cuts[instant]
    return before


def quantities_add(
    total: dict[LineKey, int], hours: Iterable[dict[LineKey, int]], *, sign: int = 1
) -> dict[LineKey, int]:
    """`total` with the hours' paid quantities added (sign -1: taken away); lines left
    with no quantity dropped."""
    result = dict(total)
    for quantities in hours:
        for key, quantity in quantities.items():
            result[key] = result.get(key, 0) + sign * quantity
    return {key: quantity for key, quantity in result.items() if quantity}


def month_summary(
    *,
    month_start: datetime,
    quantities: dict[LineKey, int],
    realized: Decimal,
    pools: dict[datetime, Decimal],
    promotions: Sequence[PromotionalCredit],
    opening: ContractVersion | None,
    currency: str,
    reserved: Sequence[InvoiceLine] = (),
) -> MonthLines:
    """The month's lines: usage lines from its paid quantities, its reservations' lines
    (`reserved`), the credits applied to its realized amount on demand (each credit to what
    was realized before its expiry: `pools` holds it for every expiry inside the month), the
    minimum."""
    start, end = month_bounds(month_start=month_start)
    total = realized
    segments = []  # realized amounts between expiries, each at its segment's start
    at, before = start, ZERO
    with localcontext(EXACT):
        for instant in sorted({c.expires_at for c in promotions if c.expires_at}):
            if start < instant < end:
                segments.append((at, pools[instant] - before))
                at, before = instant, pools[instant]
        segments.append((at, total - before))
    _, applied = allocate_promotions(
        paid=segments, promotions=promotions, month_start=start, currency=currency
    )
    usage = quantity_lines(quantities=quantities, currency=currency)
    return month_lines(
        usage=usage, applied=applied, opening=opening, currency=currency, reserved=reserved
    )
