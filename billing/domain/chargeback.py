"""Chargeback (kpis.md 3e): a tenant's month's invoice split across its projects, each line
to the cent by largest remainder, so the projects sum exactly to the invoice's total before
its balance lines. Pure: the lines, the rated quantities per project and the reservations'
covered list values per project come from billing's read models (billing.selectors).

How a line is split depends on its kind only (SPLIT_BY):
- `usage`: by the projects' unrounded realized amounts on that line (its quantities per
  project at the line's price and combined discount);
- `reservation`: by the projects' covered list value of the reservation (of the usage its
  tenant's reservations on its deployment covered: they cover pooled, kpis.md 3d);
- `minimum`, `promotion`, `sla_credit`, `adjustment`: pro rata to the projects' usage
  amounts (what the usage lines gave each of them);
- `credit`, `prepaid` (balances drawn): settlement, not charge, left out.
A line with nothing to split it by (no usage of any project) is the tenant's `(none)`'s."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, localcontext

from billing.domain.invoices import LineKey, line_realized
from billing.domain.rating.types import total_discount_pct
from metering.domain.usage.fields import STANDARD
from portal.money import EXACT, split_money

NONE_ID = 0  # the tenant's usage without a project (portal.projects.NONE_ID)
USAGE, RESERVATION = "usage", "reservation"
BY_USAGE = "usage"  # pro rata to the projects' usage amounts
BALANCES = frozenset({"credit", "prepaid"})
SPLIT_BY: dict[str, str] = {
    USAGE: "realized",
    RESERVATION: "covered",
    "minimum": BY_USAGE,
    "promotion": BY_USAGE,
    "sla_credit": BY_USAGE,
    "adjustment": BY_USAGE,
}


@dataclass(frozen=True)
class Line:
    """What a chargeback reads of an invoice line (an InvoiceLine, stored or rated)."""

    kind: str
    amount: Decimal
    model: str = ""
    token_class: str = ""
    price_class: str = ""
    list_unit_price: Decimal | None = None
    discount_pct: Decimal = Decimal(0)
    service_tier: str = ""  # a usage line's ("" read as standard)
    reservation: int | None = None  # a reservation line's

    @property
    def signature(self) -> tuple:
        return _signature(
            self.model, self.service_tier, self.token_class, self.price_class,
            self.list_unit_price, self.discount_pct,
        )  # fmt: skip


def _signature(model, service_tier, token_class, price_class, unit_price, pct) -> tuple:
    """A usage line's identity on an invoice: decimals compare by value (0.88 = 0.8800), a
    line stored without its tier is a standard one's."""
    return (
        model,
        service_tier or STANDARD,
        str(token_class or ""),
        str(price_class or ""),
        None if unit_price is None else Decimal(unit_price).normalize(),
        Decimal(pct).normalize(),
    )


@dataclass
class ProjectCharge:
    """One project's part of the invoice: amount per line kind, and their sum."""

    project: int
    by_kind: dict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))

    @property
    def total(self) -> Decimal:
        return sum(self.by_kind.values(), Decimal(0))


def usage_shares(quantities: Mapping[LineKey, int]) -> dict[tuple, dict[int, Decimal]]:
    """Per usage line (its signature), each project's unrounded realized amount on it, from
    the month's paid quantities per usage line and project (billing.domain.invoices)."""
    shares: dict[tuple, dict[int, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for key, quantity in quantities.items():
        model, service_tier, token_class, price_class, unit_price, _, discounts, project = key
        contract, tier, _ = discounts
        pct = total_discount_pct(contract=contract, tier=tier)
        signature = _signature(model, service_tier, token_class, price_class, unit_price, pct)
        with localcontext(EXACT):
            shares[signature][project] += line_realized(key, quantity)
    return shares


def line_splits(
    *,
    lines: Sequence[Line],
    quantities: Mapping[LineKey, int],
    covered: Mapping[int, Mapping[int, Decimal]] | None = None,
    currency: str,
) -> list[dict[int, Decimal]]:
    """Each line's amount per project (in project id order), parallel to `lines`: a balance
    line (settlement, not charge) whole to the tenant's (none); a reservation line by
    `covered`: per reservation id, each project's covered list value of it."""
    shares = usage_shares(quantities)
    splits: list[dict[int, Decimal] | None] = [None] * len(lines)

    def split(line: Line, weights: Mapping[int, Decimal]) -> dict[int, Decimal]:
        ordered = {p: weights[p] for p in sorted(weights) if weights[p] > 0}
        return split_money(
            amount=line.amount, weights=ordered or {NONE_ID: Decimal(1)}, currency=currency
        )

    usage_amounts: dict[int, Decimal] = defaultdict(Decimal)
    for index, line in enumerate(lines):
        if line.kind in BALANCES:
            splits[index] = {NONE_ID: line.amount}
        elif SPLIT_BY.get(line.kind) == "realized":
            parts = splits[index] = split(line, shares.get(line.signature, {}))
            for project, part in parts.items():
                usage_amounts[project] += part
        elif SPLIT_BY.get(line.kind) == "covered":
            by_reservation = (covered or {}).get(line.reservation or 0, {})
            splits[index] = split(line, by_reservation)
    return [
        parts if parts is not None else split(line, usage_amounts)
        for line, parts in zip(lines, splits, strict=True)
    ]


def line_project_quantities(line: Line, quantities: Mapping[LineKey, int]) -> dict[int, int]:
    """A usage line's tokens per project (in project id order)."""
    tokens: dict[int, int] = defaultdict(int)
    for key, quantity in quantities.items():
        model, service_tier, token_class, price_class, unit_price, _, discounts, project = key
        contract, tier, _ = discounts
        pct = total_discount_pct(contract=contract, tier=tier)
        signature = _signature(model, service_tier, token_class, price_class, unit_price, pct)
        if signature == line.signature:
            tokens[project] += quantity
    return dict(sorted(tokens.items()))


def chargeback_split(
    *,
    lines: Iterable[Line],
    quantities: Mapping[LineKey, int],
    covered: Mapping[int, Mapping[int, Decimal]] | None = None,
    currency: str,
) -> dict[int, ProjectCharge]:
    """Each project's part of every line but the balances', by project id (`(none)` is 0),
    in project id order: Σ over projects of each line = the line's amount, to the cent."""
    lines = [line for line in lines if line.kind not in BALANCES]
    charges: dict[int, ProjectCharge] = {}
    splits = line_splits(lines=lines, quantities=quantities, covered=covered, currency=currency)
    for line, parts in zip(lines, splits, strict=True):
        for project, part in parts.items():
            charge = charges.setdefault(project, ProjectCharge(project))
            charge.by_kind[line.kind] += part
    return dict(sorted(charges.items()))


def chargeback_line(line) -> Line:
    """What a chargeback reads of an invoice line (stored or rated)."""
    return Line(
        kind=str(line.kind),
        amount=line.amount,
        model=line.model,
        token_class=str(line.token_class or ""),
        price_class=str(line.price_class or ""),
        list_unit_price=line.list_unit_price,
        discount_pct=line.discount_pct,
        service_tier=line.service_tier or "",
        reservation=_reservation_id(line),
    )


def _reservation_id(line) -> int | None:
    """A line's reservation's id: a stored line's `reservation_id`, a rated one's
    `reservation`."""
    reservation = getattr(line, "reservation_id", None)
    if reservation is None:
        reservation = getattr(line, "reservation", None)
    return reservation if isinstance(reservation, int) else None
