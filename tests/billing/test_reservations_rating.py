"""Reservations and service tiers in the rating engine (kpis.md 3d and section 3, "Service
tiers"); every figure computed by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction

import pytest

from billing.domain.rating.engine import rate_month
from billing.domain.rating.types import (
    ContractVersion,
    LineKind,
    PriceVersion,
    TierMultiplier,
    TokenClass,
    UsageItem,
)
from billing.domain.reservations import GpusFrom, ReservationTerms, coverage_of

D = Decimal
M = 1_000_000
JAN = datetime(2026, 1, 1, tzinfo=UTC)
MARCH = datetime(2026, 3, 1, tzinfo=UTC)
DEPLOYMENT = "llama@h100"


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 3, 2, hour, minute, tzinfo=UTC)


def event(when: datetime, output: int, *, id_: str, tier: str = "standard", **tokens) -> UsageItem:
    tokens = {"input_tokens": 0, "cached_tokens": 0, **tokens}
    return UsageItem(
        time=when,
        model="llama",
        deployment=DEPLOYMENT,
        output_tokens=output,
        source="default",
        id=id_,
        service_tier=tier,
        **tokens,
    )


def worked_example_reservation(**changes) -> ReservationTerms:
    """2 GPUs at 4.00 per GPU-hour, term none, 10:00-12:00 on 2 March 2026."""
    terms = {
        "id": 7,
        "deployment": DEPLOYMENT,
        "hourly_rate": D("4.00"),
        "starts_at": at(10),
        "ends_at": at(12),
        "gpus": (GpusFrom(at(10), 2),),
    }
    return ReservationTerms(**{**terms, **changes})


def rate_march(items, *, reservations=(), prices=None, multipliers=()):
    """March under a paid contract without allowance or discount; d's R_ref 2,500 tok/s per
    GPU and w_in 0."""
    reservations = list(reservations)
    coverage = coverage_of(
        reservations,
        version_at=lambda _deployment, _hour: (D(2500), D(0)),
        start=MARCH,
        end=datetime(2026, 4, 1, tzinfo=UTC),
    )
    return rate_month(
        month_start=MARCH,
        items=items,
        contracts=[ContractVersion(effective_from=JAN, kind="paid")],
        prices=prices
        or [
            PriceVersion(model="llama", token_class="output", per_million=D(2), effective_from=JAN)
        ],
        currency="USD",
        multipliers=multipliers,
        coverage=coverage,
        reservations=reservations,
    )


def test_the_worked_example_of_kpis_3d():
    """cap 18 M tok and fee 8.00 an hour. Hour 10: 10 M and 6 M covered, the 4 M event split
    2 M covered / 2 M on demand; hour 11: 3 M covered. Reservation line 4 GPU-hours x 4.00 =
    16.00, usage 2 M x 2.00 = 4.00, total 20.00; covered realized 8.00 + 6.00, unused 2.00."""
    items = [
        event(at(10, 10), 10 * M, id_="a"),
        event(at(10, 20), 6 * M, id_="b"),
        event(at(10, 30), 4 * M, id_="c"),
        event(at(11, 15), 3 * M, id_="d"),
    ]

    rated = rate_march(items, reservations=[worked_example_reservation()])

    parts = [
        (r.item.id, r.item.output_tokens, r.covered, r.list_value, r.realized_amount)
        for r in rated.items
    ]
    # Hour 10: 36.00 of covered list value realized at its 8.00 of fees, pro rata:
    # 10/18, 6/18 and 2/18 of 8.00.
    assert [p[:4] for p in parts] == [
        ("a", 10 * M, True, D("20.00")),
        ("b", 6 * M, True, D("12.00")),
        ("c", 2 * M, True, D("4.00")),
        ("c", 2 * M, False, D("4.00")),
        ("d", 3 * M, True, D("6.00")),
    ]
    realized = [Fraction(p[4]) for p in parts]
    assert abs(realized[0] - Fraction(80, 18)) < Fraction(1, 10**50)
    assert abs(realized[1] - Fraction(48, 18)) < Fraction(1, 10**50)
    assert abs(realized[2] - Fraction(16, 18)) < Fraction(1, 10**50)
    assert realized[3] == 4 and realized[4] == 6
    covered_realized = sum(r for r, p in zip(realized, parts, strict=True) if p[2])
    assert abs(covered_realized - 14) < Fraction(1, 10**50)  # 8.00 + 6.00; unused 16 - 14
    assert [(line.kind, line.quantity, line.gpu_hours, line.amount) for line in rated.lines] == [
        (LineKind.USAGE, 2 * M, None, D("4.00")),
        (LineKind.RESERVATION, 0, D("4.000000"), D("16.00")),
    ]
    assert rated.lines[1].description == (
        "Reservation 7: 4 GPU-hours of llama@h100 at 4 per GPU-hour"
    )
    assert rated.total == D("20.00")
    # ρ = (8 + 6 + 4) / (36 + 6 + 4)
    rho = sum(realized, Fraction(0)) / sum(Fraction(p[3]) for p in parts)
    assert abs(rho - Fraction(18, 46)) < Fraction(1, 10**50)


def test_covered_tokens_count_for_neither_the_allowance_nor_the_tiers():
    """A 10 M allowance: the 5 M covered event leaves it whole, the 12 M on demand event in
    hour 12 (the reservation over) crosses it: 10 M free, 2 M paid at 2.00."""
    rated = rate_month(
        month_start=MARCH,
        items=[event(at(10), 5 * M, id_="a"), event(at(12), 12 * M, id_="b")],
        contracts=[ContractVersion(effective_from=JAN, kind="paid", free_tokens_per_month=10 * M)],
        prices=[
            PriceVersion(model="llama", token_class="output", per_million=D(2), effective_from=JAN)
        ],
        currency="USD",
        coverage=coverage_of(
            [worked_example_reservation()],
            version_at=lambda _d, _h: (D(2500), D(0)),
            start=MARCH,
            end=datetime(2026, 4, 1, tzinfo=UTC),
        ),
        reservations=[worked_example_reservation()],
    )

    assert [(r.item.output_tokens, r.is_paid, r.covered) for r in rated.items] == [
        (5 * M, True, True),
        (10 * M, False, False),
        (2 * M, True, False),
    ]
    assert [(line.kind, line.amount) for line in rated.lines] == [
        (LineKind.USAGE, D("4.00")),
        (LineKind.RESERVATION, D("16.00")),
    ]


def test_a_raise_and_a_cancellation_inside_an_hour_bill_their_seconds():
    """2 GPUs from 10:00, 3 from 11:00, cancelled at 11:30: fees 8.00 + 3 x 4.00 / 2 = 14.00
    for 3.5 GPU-hours; hour 11's cap 3 x 2,500 x 1,800 = 13.5 M."""
    reservation = worked_example_reservation(
        ends_at=at(11, 30), gpus=(GpusFrom(at(10), 2), GpusFrom(at(11), 3))
    )
    rated = rate_march(
        [event(at(11, 10), 13 * M, id_="a"), event(at(11, 20), M, id_="b")],
        reservations=[reservation],
    )

    assert [(r.item.output_tokens, r.covered) for r in rated.items] == [
        (13 * M, True),
        (M // 2, True),
        (M // 2, False),
    ]
    assert [(line.kind, line.gpu_hours, line.amount) for line in rated.lines] == [
        (LineKind.USAGE, None, D("1.00")),
        (LineKind.RESERVATION, D("3.500000"), D("14.00")),
    ]


def test_tiers_resolve_their_own_price_then_the_standard_one_times_the_multiplier():
    """Standard input 1.00, output 2.00, reasoning 4.00; priority output 3.00 of its own;
    batch 0.5 (its default); priority x 1.75 recorded from January.

    priority: 1 M input at 1.00 x 1.75 = 1.75; 1 M output at 3.00 (its own) = 3.00; 1 M
    reasoning at priority's output (its parent in the tier) 3.00 = 3.00.
    batch: 2 M output at 2.00 x 0.5 = 2.00. standard: 1 M output at 2.00."""
    book = [
        PriceVersion(model="llama", token_class=tc, per_million=D(p), effective_from=JAN)
        for tc, p in (("input", "1.00"), ("output", "2.00"), ("reasoning", "4.00"))
    ] + [
        PriceVersion(
            model="llama", token_class="output", per_million=D(3), effective_from=JAN,
            service_tier="priority",
        )
    ]  # fmt: skip
    rated = rate_march(
        [
            event(at(9), M, id_="s"),
            event(at(9, 10), 2 * M, id_="p", tier="priority", input_tokens=M, reasoning_tokens=M),
            event(at(9, 20), 2 * M, id_="b", tier="batch"),
        ],
        prices=book,
        multipliers=[
            TierMultiplier(service_tier="priority", multiplier=D("1.75"), effective_from=JAN)
        ],
    )

    assert [
        (line.service_tier, line.token_class, line.price_class, line.quantity, line.list_unit_price,
         line.amount)
        for line in rated.lines
    ] == [
        ("standard", TokenClass.OUTPUT, TokenClass.OUTPUT, M, D(2), D("2.00")),
        ("priority", TokenClass.INPUT, TokenClass.INPUT, M, D("1.75"), D("1.75")),
        ("priority", TokenClass.OUTPUT, TokenClass.OUTPUT, M, D(3), D("3.00")),
        ("priority", TokenClass.REASONING, TokenClass.OUTPUT, M, D(3), D("3.00")),
        ("batch", TokenClass.OUTPUT, TokenClass.OUTPUT, 2 * M, D(1), D("2.00")),
    ]  # fmt: skip
    descriptions = [line.description for line in rated.lines]
    assert descriptions[1] == "llama priority input tokens at 1.75 per million (standard × 1.75)"
    assert descriptions[3] == "llama priority reasoning tokens at 3 per million (priced as output)"
    assert descriptions[4] == "llama batch output tokens at 1 per million (standard × 0.5)"
    assert rated.total == D("11.75")


@pytest.mark.parametrize(
    ("gpus", "message"),
    [((GpusFrom(at(10), 2), GpusFrom(at(11), 1)), "never fall"), ((), "start at its start")],
)
def test_reservation_terms_refuse_falling_or_missing_gpus(gpus, message):
    with pytest.raises(ValueError, match=message):
        worked_example_reservation(gpus=gpus)


def test_gpu_seconds_by_versions_equal_the_sum_of_the_hours():
    reservation = worked_example_reservation(
        ends_at=datetime(2026, 3, 9, 7, 30, 17, tzinfo=UTC),
        gpus=(GpusFrom(at(10), 2), GpusFrom(at(15), 3), GpusFrom(at(23), 7)),
    )
    for start, end in ((MARCH, datetime(2026, 4, 1, tzinfo=UTC)), (at(12), at(16))):
        hours = sum(held.gpu_seconds for held in reservation.hours(start, end))
        assert reservation.gpu_seconds(start, end) == hours
    assert reservation.gpu_seconds(at(12), at(16)) == (3 * 2 + 1 * 3) * 3600
