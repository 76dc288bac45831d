"""Rating of one tenant's UTC month (kpis.md section 3); every figure computed by hand."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from billing.domain.invoices import adjustment_line
from billing.domain.rating.boundaries import largest_remainder, split_at, split_at_production
from billing.domain.rating.engine import rate_month, token_classes
from billing.domain.rating.types import (
    ContractKind,
    ContractVersion,
    InvoiceLine,
    LineKind,
    PriceVersion,
    PromotionalCredit,
    RatingError,
    Running,
    TokenClass,
    UnsoldReason,
    UsageItem,
    VolumeTier,
)
from portal.money import round_money

D = Decimal
JAN = datetime(2026, 1, 1, tzinfo=UTC)


def at(day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, 1, day, hour, minute, second, tzinfo=UTC)


def prices(
    model: str = "llama", *, input_: str = "1.00", cached: str = "0.50", output: str = "2.00"
) -> list[PriceVersion]:
    """List prices per million tokens in force from 2026-01-01."""
    return [
        PriceVersion(model=model, token_class=tc, per_million=D(p), effective_from=JAN)
        for tc, p in (
            (TokenClass.INPUT, input_),
            (TokenClass.CACHED_INPUT, cached),
            (TokenClass.OUTPUT, output),
        )
    ]


def paid(**kwargs) -> ContractVersion:
    return ContractVersion(effective_from=kwargs.pop("effective_from", JAN), kind="paid", **kwargs)


def rate_january(items, *, contracts=None, book=None, **options):
    """`rate_month` of January 2026 under `contracts` (one plain paid contract if None) at
    the price `book` (the list `prices()` if None)."""
    return rate_month(
        month_start=JAN,
        items=items,
        contracts=[paid()] if contracts is None else contracts,
        prices=prices() if book is None else book,
        **options,
    )


def item(
    when: datetime,
    *,
    output: int = 0,
    input_: int = 0,
    cached: int = 0,
    model: str = "llama",
    id_: str = "",
    cache_write: int = 0,
    reasoning: int = 0,
) -> UsageItem:
    return UsageItem(
        time=when,
        model=model,
        input_tokens=input_,
        cached_tokens=cached,
        output_tokens=output,
        source="default",
        id=id_ or when.isoformat(),
        cache_write_tokens=cache_write,
        reasoning_tokens=reasoning,
    )


def usage(rated) -> list[tuple]:
    """(token_class, quantity, list_unit_price, discount_pct, list_amount, discount, amount)."""
    return [
        (
            line.token_class,
            line.quantity,
            line.list_unit_price,
            line.discount_pct,
            line.list_amount,
            line.discount,
            line.amount,
        )
        for line in rated.lines
        if line.kind == LineKind.USAGE
    ]


def exactly(value: Decimal, fraction: Fraction) -> bool:
    """A Decimal equals an exact fraction to the 60 digits a share is computed to."""
    return abs(Fraction(value) - fraction) < Fraction(1, 10**55)


def amounts(line) -> tuple:
    """(kind, list_amount, discount, amount) of a line."""
    return (line.kind, line.list_amount, line.discount, line.amount)


def test_token_classes_put_each_token_in_exactly_one_class():
    # input 100 = 30 cached + 20 written to the cache + 50 uncached; output 50 = 15 reasoning
    # + 35 answer: the classes sum to the counts, nothing counted twice.
    usage = item(at(3), input_=100, cached=30, output=50, cache_write=20, reasoning=15)
    assert token_classes(usage) == {
        TokenClass.INPUT: 50,
        TokenClass.CACHED_INPUT: 30,
        TokenClass.CACHE_WRITE: 20,
        TokenClass.OUTPUT: 35,
        TokenClass.REASONING: 15,
    }
    with pytest.raises(ValueError, match="cached_tokens"):
        item(at(3), input_=10, cached=6, output=0, cache_write=5)
    with pytest.raises(ValueError, match="reasoning_tokens"):
        item(at(3), input_=10, cached=0, output=4, reasoning=5)


def test_rate_month_applies_contract_discount_to_every_class():
    # input 800,000 x 1.00/M = 0.80; cached 200,000 x 0.50/M = 0.10; output 500,000 x 2/M = 1.00
    # list 1.90; realized with 10% off = 1.71
    rated = rate_january(
        [item(at(3), input_=1_000_000, cached=200_000, output=500_000)],
        contracts=[paid(discount_pct=D(10))],
    )

    assert rated.list_value == D("1.90")
    assert rated.realized_amount == D("1.71")
    assert rated.items[0].is_paid and rated.items[0].unsold_reason is None
    assert usage(rated) == [
        (TokenClass.INPUT, 800_000, D("1.00"), D(10), D("0.80"), D("0.08"), D("0.72")),
        (TokenClass.CACHED_INPUT, 200_000, D("0.50"), D(10), D("0.10"), D("0.01"), D("0.09")),
        (TokenClass.OUTPUT, 500_000, D("2.00"), D(10), D("1.00"), D("0.10"), D("0.90")),
    ]
    assert rated.lines[0].model == "llama"
    assert (
        rated.lines[0].description == "llama input tokens at 1 per million, contract discount 10%"
    )
    assert rated.total == D("1.71")


def test_rate_month_tiers_begin_after_their_first_tokens_and_split_the_item_crossing_one():
    # running paid tokens: 600,000 then 1,000,000 (the first 1M paid tokens are before the
    # 1M tier: 0%); the third item runs from 1,000,000 to 3,500,000 and crosses the 3M
    # boundary: 2,000,000 at 5%, 500,000 at 10%. Output at 2.00/M:
    # 0%: 1,000,000 -> 2.00; 5%: 2,000,000 -> 4.00 - 0.20 = 3.80; 10%: 500,000 -> 1.00 - 0.10
    tiers = (
        VolumeTier(from_tokens=1_000_000, discount_pct=D(5)),
        VolumeTier(from_tokens=3_000_000, discount_pct=D(10)),
    )
    rated = rate_january(
        [
            item(at(2), output=600_000),
            item(at(3), output=400_000),
            item(at(4), output=2_500_000),
        ],
        contracts=[paid(volume_tiers=tiers)],
    )

    assert [(r.item.output_tokens, r.tier_discount_pct) for r in rated.items] == [
        (600_000, D(0)),
        (400_000, D(0)),
        (2_000_000, D(5)),
        (500_000, D(10)),
    ]
    assert [r.list_value for r in rated.items[2:]] == [D("4.00"), D("1.00")]  # 4/5, 1/5 of 5.00
    assert [r.item.whole for r in rated.items[2:]] == [rated.items[2].item.part_of] * 2
    assert usage(rated) == [
        (TokenClass.OUTPUT, 1_000_000, D("2.00"), D(0), D("2.00"), D("0.00"), D("2.00")),
        (TokenClass.OUTPUT, 2_000_000, D("2.00"), D(5), D("4.00"), D("0.20"), D("3.80")),
        (TokenClass.OUTPUT, 500_000, D("2.00"), D(10), D("1.00"), D("0.10"), D("0.90")),
    ]
    assert rated.total == D("6.70")
    assert rated.paid_tokens == 3_500_000


def test_rate_month_tier_boundary_inside_one_event_prices_each_part_at_its_tier():
    # Tier 10% beyond 1,000,000 paid tokens. 800,000 output first; then an event of input
    # 400,000 (100,000 cached) and output 300,000 = 700,000: 200,000 are left before the
    # boundary, allocated over its classes 300,000 / 100,000 / 300,000 by largest remainder:
    # quotas 85,714.29 / 28,571.43 / 85,714.29, floors 199,999, the last token to the
    # largest remainder (cached). Before: 85,714 / 28,572 / 85,714; after: 214,286 /
    # 71,428 / 214,286. Lines at 1.00 / 0.50 / 2.00 per million, each rounded once:
    # input 0%: 0.085714 -> 0.09; 10%: 0.214286 -> 0.21, amount 0.1928574 -> 0.19
    # cached 0%: 0.014286 -> 0.01; 10%: 0.035714 -> 0.04, amount 0.0321426 -> 0.03
    # output 0%: 885,714 -> 1.771428 -> 1.77; 10%: 0.428572 -> 0.43, amount 0.3857148 -> 0.39
    tiers = (VolumeTier(from_tokens=1_000_000, discount_pct=D(10)),)
    crossing = item(at(5), input_=400_000, cached=100_000, output=300_000)
    rated = rate_january(
        [item(at(2), output=800_000), crossing], contracts=[paid(volume_tiers=tiers)]
    )

    before, after = rated.items[1:]
    assert [(p.item.input_tokens, p.item.cached_tokens, p.item.output_tokens) for p in
            (before, after)] == [(114_286, 28_572, 85_714), (285_714, 71_428, 214_286)]  # fmt: skip
    assert (before.tier_discount_pct, after.tier_discount_pct) == (D(0), D(10))
    assert before.item.part_of == after.item.part_of == crossing
    # Its list value 0.95 splits 2/7, 5/7 (fractions, not the whole-token classes' values).
    assert exactly(before.list_value, Fraction("0.95") * Fraction(2, 7))
    assert exactly(after.list_value, Fraction("0.95") * Fraction(5, 7))
    assert exactly(after.realized_amount, Fraction("0.95") * Fraction(5, 7) * Fraction("0.9"))
    assert usage(rated) == [
        (TokenClass.INPUT, 85_714, D("1.00"), D(0), D("0.09"), D("0.00"), D("0.09")),
        (TokenClass.INPUT, 214_286, D("1.00"), D(10), D("0.21"), D("0.02"), D("0.19")),
        (TokenClass.CACHED_INPUT, 28_572, D("0.50"), D(0), D("0.01"), D("0.00"), D("0.01")),
        (TokenClass.CACHED_INPUT, 71_428, D("0.50"), D(10), D("0.04"), D("0.01"), D("0.03")),
        (TokenClass.OUTPUT, 885_714, D("2.00"), D(0), D("1.77"), D("0.00"), D("1.77")),
        (TokenClass.OUTPUT, 214_286, D("2.00"), D(10), D("0.43"), D("0.04"), D("0.39")),
    ]
    assert rated.total == D("2.48")
    assert rated.paid_tokens == 1_500_000


def test_rate_month_tier_compounds_with_contract_discount():
    # 10% contract then 5% tier: keep 0.90 x 0.95 = 0.855, i.e. 14.5% combined
    # output 1,000,000 x 2.00/M = 2.00 -> 1.71
    rated = rate_january(
        [item(at(2), output=1_000_000)],
        contracts=[
            paid(discount_pct=D(10), volume_tiers=(VolumeTier(from_tokens=0, discount_pct=D(5)),))
        ],
    )

    assert rated.items[0].total_discount_pct == D("14.5")
    assert usage(rated) == [
        (TokenClass.OUTPUT, 1_000_000, D("2.00"), D("14.5"), D("2.00"), D("0.29"), D("1.71")),
    ]
    assert rated.lines[0].description == (
        "llama output tokens at 2 per million, contract discount 10%,"
        " volume tier ≥ 0 tokens: −5% (14.5% off in all)"
    )


def test_rate_month_tiers_count_paid_tokens_only():
    # allowance 500,000: the 400,000 item is free (not counted by tiers); the 700,000 item
    # crosses the allowance: 100,000 free, 600,000 paid (tier running 600,000: 0%); the
    # 400,000 item brings paid tokens from 600,000 to 1,000,000, still before the tier's
    # first token; the 10 after it are at 5%.
    rated = rate_january(
        [
            item(at(2), output=400_000),
            item(at(3), output=700_000),
            item(at(4), output=400_000),
            item(at(5), output=10),
        ],
        contracts=[
            paid(
                free_tokens_per_month=500_000,
                volume_tiers=(VolumeTier(from_tokens=1_000_000, discount_pct=D(5)),),
            )
        ],
    )

    assert [(r.item.output_tokens, r.unsold_reason, r.tier_discount_pct) for r in rated.items] == [
        (400_000, UnsoldReason.ALLOWANCE, D(0)),
        (100_000, UnsoldReason.ALLOWANCE, D(0)),
        (600_000, None, D(0)),
        (400_000, None, D(0)),
        (10, None, D(5)),
    ]
    assert rated.paid_tokens == 1_000_010
    assert rated.unsold_tokens[UnsoldReason.ALLOWANCE] == 500_000


def test_rate_month_allowance_crossing_splits_the_event_and_pays_all_after():
    # allowance 1,000,000 total tokens, order (time, source, id):
    # a: 600,000 -> running 600,000 free; b (same time, id "b"): 400,000 -> exactly
    # 1,000,000, still free, whole; c (same time, id "c"): 200,000 -> beyond: paid whole;
    # d: 10 tokens -> paid although tiny. Paid output 200,010 x 2/M = 0.40002 -> 0.40
    t = at(5, 12)
    a = item(at(5, 11), input_=500_000, output=100_000, id_="a")
    b = item(t, output=400_000, id_="b")
    c = item(t, output=200_000, id_="c")
    d = item(at(6), output=10, id_="d")

    rated = rate_january(
        [d, c, b, a],  # input order does not matter
        contracts=[paid(free_tokens_per_month=1_000_000)],
    )

    assert [r.item.id for r in rated.items] == ["a", "b", "c", "d"]
    assert [r.is_paid for r in rated.items] == [False, False, True, True]
    assert all(r.item.part_of is None for r in rated.items)
    assert rated.allowance_tokens == 1_000_000
    assert rated.unsold_tokens[UnsoldReason.ALLOWANCE] == 1_000_000
    assert rated.paid_tokens == 200_010
    assert rated.list_value == D("0.40002")
    assert usage(rated) == [
        (TokenClass.OUTPUT, 200_010, D("2.00"), D(0), D("0.40"), D("0.00"), D("0.40")),
    ]


def test_the_event_crossing_the_allowance_is_split_never_forfeited():
    """kpis.md section 3, "Boundaries": an allowance of 1,000,000 tokens; events of 600,000
    then 700,000 total tokens (input 400,000 with 100,000 cached, output 300,000): the second
    is split 400,000 free, 300,000 paid. The free part holds its classes 300,000 / 100,000 /
    300,000 in proportion by largest remainder: quotas 171,428.57 / 57,142.86 / 171,428.57,
    floors 399,998; one token each to the two largest remainders, cached (.86) then, of
    the tie at .57, input (listed first): 171,429 / 57,143 / 171,428. The paid part is the
    rest: 128,571 / 42,857 / 128,572. With 10% off, each line rounded once, half-up:
    input 128,571 x 1.00/M = 0.128571 -> 0.13, amount 0.1157139 -> 0.12
    cached 42,857 x 0.50/M = 0.0214285 -> 0.02, amount 0.01928565 -> 0.02
    output 128,572 x 2.00/M = 0.257144 -> 0.26, amount 0.2314296 -> 0.23; total 0.37."""
    first = item(at(3), input_=200_000, output=400_000, id_="first")
    second = item(at(4), input_=400_000, cached=100_000, output=300_000, id_="second")

    rated = rate_january(
        [first, second], contracts=[paid(discount_pct=D(10), free_tokens_per_month=1_000_000)]
    )

    free, bought = rated.items[1:]
    assert [(r.item.id, r.unsold_reason, r.item.total_tokens) for r in rated.items] == [
        ("first", UnsoldReason.ALLOWANCE, 600_000),
        ("second", UnsoldReason.ALLOWANCE, 400_000),
        ("second", None, 300_000),
    ]
    assert token_classes(free.item) == {
        TokenClass.INPUT: 171_429, TokenClass.CACHED_INPUT: 57_143, TokenClass.CACHE_WRITE: 0,
        TokenClass.OUTPUT: 171_428, TokenClass.REASONING: 0,
    }  # fmt: skip
    assert token_classes(bought.item) == {
        TokenClass.INPUT: 128_571, TokenClass.CACHED_INPUT: 42_857, TokenClass.CACHE_WRITE: 0,
        TokenClass.OUTPUT: 128_572, TokenClass.REASONING: 0,
    }  # fmt: skip
    assert (free.item.share, bought.item.share) == (Fraction(4, 7), Fraction(3, 7))
    assert (free.item.requests, bought.item.requests) == (Fraction(4, 7), Fraction(3, 7))
    assert (free.item.time, bought.item.time) == (second.time, second.time)
    assert rated.unsold_tokens[UnsoldReason.ALLOWANCE] == 1_000_000  # none forfeited
    assert rated.paid_tokens == 300_000
    # The paid part's list value is 3/7 of the event's 0.95, realized 90% of it.
    assert exactly(rated.list_value, Fraction("0.95") * Fraction(3, 7))
    assert exactly(rated.realized_amount, Fraction("0.95") * Fraction(3, 7) * Fraction("0.9"))
    assert usage(rated) == [
        (TokenClass.INPUT, 128_571, D("1.00"), D(10), D("0.13"), D("0.01"), D("0.12")),
        (TokenClass.CACHED_INPUT, 42_857, D("0.50"), D(10), D("0.02"), D("0.00"), D("0.02")),
        (TokenClass.OUTPUT, 128_572, D("2.00"), D(10), D("0.26"), D("0.03"), D("0.23")),
    ]
    assert rated.total == D("0.37")


def test_an_event_crossing_the_allowance_and_a_tier_is_split_at_both():
    # allowance 100 tokens, tier 20% beyond 50 paid tokens; one event of 300 output tokens
    # after 40 free ones: 60 free, then 50 paid at 0%, then 190 at 20%. Output at 2.00/M.
    rated = rate_january(
        [item(at(2), output=40), item(at(3), output=300, id_="big")],
        contracts=[
            paid(
                free_tokens_per_month=100,
                volume_tiers=(VolumeTier(from_tokens=50, discount_pct=D(20)),),
            )
        ],
    )

    assert [(r.item.output_tokens, r.unsold_reason, r.tier_discount_pct, r.item.share)
            for r in rated.items[1:]] == [
        (60, UnsoldReason.ALLOWANCE, D(0), Fraction(1, 5)),
        (50, None, D(0), Fraction(1, 6)),
        (190, None, D(20), Fraction(19, 30)),
    ]  # fmt: skip
    assert [r.list_value for r in rated.items[2:]] == [D("0.0001"), D("0.00038")]
    assert [r.realized_amount for r in rated.items[2:]] == [D("0.0001"), D("0.000304")]
    assert rated.running == Running(consumed=340, paid_tokens=240)


def test_rate_month_allowance_comes_from_the_contract_in_force_at_month_start():
    # 1,000 free tokens at month start; the version of Jan 15 grants 1,000,000 but only
    # from next month on, so the 5,000-token item of Jan 20 is split: 1,000 free, 4,000
    # paid: 4,000 x 2/M = 0.008 -> 0.01
    rated = rate_january(
        [item(at(20), output=5_000)],
        contracts=[
            paid(free_tokens_per_month=1_000),
            paid(free_tokens_per_month=1_000_000, effective_from=at(15)),
        ],
    )

    assert rated.allowance_tokens == 1_000
    assert [(r.item.output_tokens, r.is_paid) for r in rated.items] == [
        (1_000, False),
        (4_000, True),
    ]
    assert rated.total == D("0.01")


def test_rate_month_promotion_reduces_realized_pro_rata():
    # realized: x 1,000,000 x 2/M = 2.00, y 3,000,000 x 2/M = 6.00 (total 8.00)
    # credit 2.00 shared 2/8: x 0.50, y 1.50; invoice 8.00 - 2.00 = 6.00
    rated = rate_january(
        [item(at(5), output=1_000_000), item(at(15), output=3_000_000)],
        promotions=[PromotionalCredit(id="welcome", amount=D("2.00"), description="Welcome")],
    )

    assert [r.promotion_amount for r in rated.items] == [D("0.50"), D("1.50")]
    assert [r.realized_after_promotions for r in rated.items] == [D("1.50"), D("4.50")]
    assert rated.realized_amount == D("8.00")
    assert rated.promotion_amount == D("2.00")
    assert rated.realized_after_promotions == D("6.00")
    promotion = rated.lines[-1]
    assert amounts(promotion) == (LineKind.PROMOTION, D("0.00"), D("2.00"), D("-2.00"))
    assert promotion.description == "Welcome"
    assert [(p.credit_id, p.applied_amount, p.billed_amount) for p in rated.promotions] == [
        ("welcome", D("2.00"), D("2.00"))
    ]
    assert rated.total == D("6.00")


def test_rate_month_promotion_larger_than_usage_is_capped_at_usage():
    # credit 10.00 against realized 2.00: 2.00 used, invoice 0.00
    rated = rate_january(
        [item(at(5), output=1_000_000)], promotions=[PromotionalCredit(id="big", amount=D("10.00"))]
    )

    assert rated.promotions[0].applied_amount == D("2.00")
    assert rated.lines[-1].amount == D("-2.00")
    assert rated.total == D("0.00")


def test_rate_month_promotion_expiry_limits_it_to_earlier_usage():
    # credit 1.00 expiring Jan 10: only x (Jan 5, realized 2.00) is eligible -> x 1.00,
    # y (Jan 15, 6.00) 0; invoice 8.00 - 1.00 = 7.00
    rated = rate_january(
        [item(at(5), output=1_000_000), item(at(15), output=3_000_000)],
        promotions=[PromotionalCredit(id="p", amount=D("1.00"), expires_at=at(10))],
    )

    assert [r.promotion_amount for r in rated.items] == [D("1.00"), D(0)]
    assert rated.total == D("7.00")


def test_rate_month_promotion_expired_before_month_is_not_applied():
    rated = rate_january(
        [item(at(5), output=1_000_000)],
        promotions=[PromotionalCredit(id="old", amount=D("1.00"), expires_at=JAN)],
    )

    assert rated.promotions == ()
    assert [line.kind for line in rated.lines] == [LineKind.USAGE]
    assert rated.total == D("2.00")


def test_rate_month_promotions_consume_earliest_expiry_first():
    # a (1.00, expires Jan 10) goes first, all on x: x left 1.00, y 6.00 (pool 7.00);
    # b (3.50, no expiry) shares 3.50 x 1/7 = 0.50 to x, 3.50 x 6/7 = 3.00 to y.
    # invoice 8.00 - 1.00 - 3.50 = 3.50
    rated = rate_january(
        [item(at(5), output=1_000_000), item(at(15), output=3_000_000)],
        promotions=[
            PromotionalCredit(id="b", amount=D("3.50")),
            PromotionalCredit(id="a", amount=D("1.00"), expires_at=at(10)),
        ],
    )

    assert [p.credit_id for p in rated.promotions] == ["a", "b"]
    assert [r.promotion_amount for r in rated.items] == [D("1.50"), D("3.00")]
    assert [line.amount for line in rated.lines if line.kind == LineKind.PROMOTION] == [
        D("-1.00"),
        D("-3.50"),
    ]
    assert rated.total == D("3.50")


def test_rate_month_mid_month_price_change_splits_usage_by_item_time():
    # output 2.00/M until Jan 15 00:00, 3.00/M from then (an item exactly at the
    # change takes the new price): 1M at 2.00 = 2.00, 1M at 3.00 = 3.00
    book = [
        *prices(),
        PriceVersion(
            model="llama",
            token_class=TokenClass.OUTPUT,
            per_million=D("3.00"),
            effective_from=at(15),
        ),
    ]
    rated = rate_january(
        [item(at(14, 23, 59, 59), output=1_000_000), item(at(15), output=1_000_000)], book=book
    )

    assert usage(rated) == [
        (TokenClass.OUTPUT, 1_000_000, D("2.00"), D(0), D("2.00"), D("0.00"), D("2.00")),
        (TokenClass.OUTPUT, 1_000_000, D("3.00"), D(0), D("3.00"), D("0.00"), D("3.00")),
    ]
    assert rated.total == D("5.00")


def test_price_version_rejects_effective_from_off_the_hour():
    with pytest.raises(ValueError, match="whole UTC hour"):
        PriceVersion(
            model="llama", token_class="output", per_million=D(1), effective_from=at(1, 0, 30)
        )


def test_rate_month_committed_minimum_shortfall():
    # usage 1.71 (the discount example) against a 10.00 minimum: shortfall 8.29
    rated = rate_january(
        [item(at(3), input_=1_000_000, cached=200_000, output=500_000)],
        contracts=[paid(discount_pct=D(10), committed_minimum=D("10.00"))],
    )

    minimum = rated.lines[-1]
    assert amounts(minimum) == (LineKind.MINIMUM, D("8.29"), D("0.00"), D("8.29"))
    assert rated.minimum_shortfall == D("8.29")
    assert rated.total == D("10.00")


def test_rate_month_committed_minimum_is_measured_before_promotions():
    # usage 8.00, credit 2.00, minimum 10.00: shortfall 10.00 - 8.00 = 2.00,
    # invoice 8.00 - 2.00 + 2.00 = 8.00
    rated = rate_january(
        [item(at(5), output=4_000_000)],
        contracts=[paid(committed_minimum=D("10.00"))],
        promotions=[PromotionalCredit(id="p", amount=D("2.00"))],
    )

    assert [(line.kind, line.amount) for line in rated.lines] == [
        (LineKind.USAGE, D("8.00")),
        (LineKind.PROMOTION, D("-2.00")),
        (LineKind.MINIMUM, D("2.00")),
    ]
    assert rated.total == D("8.00")


def test_rate_month_committed_minimum_met_adds_no_line():
    rated = rate_january(
        [item(at(5), output=4_000_000)], contracts=[paid(committed_minimum=D("8.00"))]
    )

    assert [line.kind for line in rated.lines] == [LineKind.USAGE]
    assert rated.minimum_shortfall == 0
    assert rated.total == D("8.00")


def test_rate_month_unsold_reasons_follow_the_contract_in_force():
    # none before Jan 5, trial from Jan 5, internal from Jan 10, paid from Jan 20
    contracts = [
        ContractVersion(effective_from=at(5), kind=ContractKind.TRIAL),
        ContractVersion(effective_from=at(10), kind=ContractKind.INTERNAL),
        paid(effective_from=at(20)),
    ]
    rated = rate_january(
        [
            item(at(2), output=100),
            item(at(6), output=200),
            item(at(12), output=300),
            item(at(21), output=1_000_000),
        ],
        contracts=contracts,
    )

    assert [r.unsold_reason for r in rated.items] == [
        UnsoldReason.NO_CONTRACT,
        UnsoldReason.TRIAL,
        UnsoldReason.INTERNAL,
        None,
    ]
    assert rated.unsold_tokens == {
        UnsoldReason.NO_CONTRACT: 100,
        UnsoldReason.TRIAL: 200,
        UnsoldReason.INTERNAL: 300,
        UnsoldReason.ALLOWANCE: 0,
    }
    assert [r.list_value for r in rated.items[:3]] == [D(0), D(0), D(0)]
    assert rated.total == D("2.00")  # only the paid 1,000,000 output tokens


def test_rate_month_trial_reason_takes_precedence_over_allowance():
    rated = rate_january(
        [item(at(2), output=500)],
        contracts=[ContractVersion(effective_from=JAN, kind="trial", free_tokens_per_month=1_000)],
        book=[],  # unsold usage never needs a price
    )

    assert rated.items[0].unsold_reason == UnsoldReason.TRIAL
    assert rated.lines == ()
    assert rated.total == 0


def test_rate_month_missing_price_names_model_and_time():
    with pytest.raises(RatingError, match=r"'ghost' at 2026-01-03T04:00:00\+00:00") as caught:
        rate_january([item(at(3, 4), output=10, model="ghost")])

    assert caught.value.model == "ghost"
    assert caught.value.time == at(3, 4)


def test_rate_month_missing_class_price_names_the_class():
    book = [p for p in prices() if p.token_class != TokenClass.INPUT]
    with pytest.raises(RatingError, match="no input list price") as caught:
        rate_january([item(at(3), input_=10, output=10)], book=book)

    assert caught.value.token_class == TokenClass.INPUT


def test_rate_month_price_not_yet_in_force_is_missing():
    book = [
        PriceVersion(model="llama", token_class=tc, per_million=D(1), effective_from=at(10))
        for tc in TokenClass
    ]
    with pytest.raises(RatingError, match="'llama' at 2026-01-09T23:00:00"):
        rate_january([item(at(9, 23), output=10)], book=book)


def test_round_money_rounds_half_up_per_currency():
    assert round_money(amount=D("0.005"), currency="USD") == D("0.01")
    assert round_money(amount=D("0.0049999"), currency="USD") == D("0.00")
    assert round_money(amount=D("0.015"), currency="USD") == D("0.02")
    assert round_money(amount=D("-0.005"), currency="USD") == D("-0.01")
    assert round_money(amount=D("2.5"), currency="JPY") == D(3)
    assert round_money(amount=D("0.0005"), currency="KWD") == D("0.001")
    with pytest.raises(ValueError, match="unknown currency"):
        round_money(amount=D(1), currency="XXX")


def test_rate_month_rounds_exact_midpoint_half_up():
    # 5,000 output x 1.00/M = 0.005 exactly -> 0.01
    # 50,000 input x 1.00/M = 0.05, 10% off = 0.045 -> 0.05 (half-even would give 0.04)
    rated = rate_january(
        [item(at(2), input_=50_000, output=5_000)],
        contracts=[paid(discount_pct=D(10))],
        book=prices(input_="1.00", output="1.00"),
    )

    assert usage(rated) == [
        (TokenClass.INPUT, 50_000, D("1.00"), D(10), D("0.05"), D("0.00"), D("0.05")),
        (TokenClass.OUTPUT, 5_000, D("1.00"), D(10), D("0.01"), D("0.01"), D("0.00")),
    ]
    # output amount: 0.005 x 0.9 = 0.0045 -> 0.00
    assert rated.total == D("0.05")


def test_rate_month_rounds_once_per_line_not_per_item():
    # three items of 3,000 output at 1.00/M: 0.003 each (0.00 if rounded per item);
    # one line of 9,000 tokens = 0.009 -> 0.01
    rated = rate_january([item(at(d), output=3_000) for d in (2, 3, 4)], book=prices(output="1.00"))

    assert [r.list_value for r in rated.items] == [D("0.003")] * 3
    assert usage(rated) == [
        (TokenClass.OUTPUT, 9_000, D("1.00"), D(0), D("0.01"), D("0.00"), D("0.01")),
    ]
    assert rated.total == D("0.01")


def _invoiced_and_rerated(late: UsageItem, contracts: list[ContractVersion]):
    """January rated at prices() with 1,000,000 output tokens on Jan 20 (the invoiced month),
    then rated again with the `late` item too."""
    on_time, book = [item(at(20), output=1_000_000)], prices()
    invoiced = rate_january(on_time, contracts=contracts, book=book)
    rerated = rate_january([*on_time, late], contracts=contracts, book=book)
    return invoiced, rerated


def _adjustment(invoiced_lines, rerated_lines):
    return adjustment_line(
        month_start=JAN, invoiced_lines=invoiced_lines, rerated_lines=rerated_lines, currency="USD"
    )


def test_adjustment_line_for_late_usage_is_positive():
    # invoiced: 1,000,000 output = 2.00; a late 500,000 output (1.00) arrives
    invoiced, rerated = _invoiced_and_rerated(item(at(31, 23), output=500_000), [paid()])

    line = _adjustment(invoiced.lines, rerated.lines)

    assert line is not None
    assert amounts(line) == (LineKind.ADJUSTMENT, D("1.00"), D("0.00"), D("1.00"))
    assert line.description == "Adjustment for 2026-01: usage re-rated with late events"


def test_adjustment_line_for_late_usage_can_be_negative():
    # tier 90% beyond 1,500,000 paid tokens. Invoiced: 1,000,000 output on Jan 20 = 2.00.
    # A late 1,500,000 cached input tokens on Jan 5 (0.50/M: 0.75) fill the tokens before the
    # tier, which moves the Jan 20 output into it: 90% off, 2.00 -> 0.20. Re-rated 0.95.
    # adjustment: amount 0.95 - 2.00 = -1.05; list 2.75 - 2.00 = 0.75; discount 1.80
    contracts = [paid(volume_tiers=(VolumeTier(from_tokens=1_500_000, discount_pct=D(90)),))]
    late = item(at(5), input_=1_500_000, cached=1_500_000)
    invoiced, rerated = _invoiced_and_rerated(late, contracts)

    line = _adjustment(invoiced.lines, rerated.lines)

    assert rerated.total == D("0.95")
    assert line is not None
    assert (line.list_amount, line.discount, line.amount) == (D("0.75"), D("1.80"), D("-1.05"))


def test_adjustment_line_counts_earlier_adjustments_of_the_month():
    invoiced, rerated = _invoiced_and_rerated(item(at(21), output=500_000), [paid()])
    first = _adjustment(invoiced.lines, rerated.lines)
    assert first is not None

    again = _adjustment([*invoiced.lines, first], rerated.lines)

    assert again is None


def test_adjustment_line_rejects_unrounded_and_sla_credit_lines():
    unrounded = InvoiceLine(
        kind=LineKind.USAGE,
        list_amount=D("0.005"),
        discount=D(0),
        amount=D("0.005"),
        description="",
    )
    credit = InvoiceLine(
        kind=LineKind.SLA_CREDIT,
        list_amount=D(0),
        discount=D("1.00"),
        amount=D("-1.00"),
        description="",
    )
    with pytest.raises(ValueError, match="not rounded"):
        _adjustment([unrounded], [])
    with pytest.raises(ValueError, match="sla_credit"):
        _adjustment([], [credit])


def test_rate_month_rejects_items_outside_the_month():
    with pytest.raises(ValueError, match="outside the month"):
        rate_january([item(datetime(2026, 2, 1, tzinfo=UTC), output=1)])


def test_split_at_production_cuts_where_a_reservations_capacity_runs_out():
    # kpis.md 3d's worked example: 2 M of an hour's 18 M capacity left before an event of
    # 4 M output tokens (w_in 0: tok(e) = 4 M): 2 M covered, 2 M on demand.
    event = item(at(2, 10), output=4 * 1_000_000)
    covered, on_demand = split_at_production(
        event, left=Fraction(2_000_000), production=Fraction(4_000_000)
    )
    assert covered is not None and on_demand is not None
    assert (covered.output_tokens, on_demand.output_tokens) == (2_000_000, 2_000_000)
    # With w_in 0.5, input 1,000 and output 1,000 make tok(e) = 1,500: 500 of it left cuts
    # at floor(500 / 1,500 x 2,000) = 666 total tokens, 333 input and 333 output.
    mixed = item(at(2, 11), input_=1_000, output=1_000)
    before, after = split_at_production(mixed, left=Fraction(500), production=Fraction(1_500))
    assert before is not None and after is not None
    assert (before.input_tokens, before.output_tokens, after.total_tokens) == (333, 333, 1_334)
    assert split_at_production(mixed, left=Fraction(1_500), production=Fraction(1_500)) == (
        mixed,
        None,
    )
    assert split_at_production(mixed, left=Fraction(0), production=Fraction(1_500)) == (
        None,
        mixed,
    )


def test_largest_remainder_breaks_ties_in_token_class_order():
    # 5 tokens over four classes of 1 each: quotas 1.25, the one left to the first class.
    ones = {TokenClass.INPUT: 1, TokenClass.CACHED_INPUT: 1, TokenClass.OUTPUT: 1,
            TokenClass.REASONING: 1, TokenClass.CACHE_WRITE: 0}  # fmt: skip
    assert largest_remainder(ones, 3) == {
        TokenClass.INPUT: 1, TokenClass.CACHED_INPUT: 1, TokenClass.OUTPUT: 1,
        TokenClass.REASONING: 0, TokenClass.CACHE_WRITE: 0,
    }  # fmt: skip
    with pytest.raises(ValueError, match="cannot allocate 5 of 4"):
        largest_remainder(ones, 5)


_classes = st.tuples(*[st.integers(0, 10**12)] * 5)


@settings(max_examples=300, deadline=None)
@given(counts=_classes, cut=st.integers(-5, 5 * 10**12), again=st.integers(0, 5 * 10**12))
def test_split_at_holds_exactly_the_tokens_before_the_boundary_and_loses_none(counts, cut, again):
    uncached, cached, written, answer, reasoning = counts
    whole = item(at(2), input_=uncached + cached + written, cached=cached, cache_write=written,
                 output=answer + reasoning, reasoning=reasoning)  # fmt: skip
    before, rest = split_at(whole, cut)
    if rest is None:
        assert before is whole and cut >= whole.total_tokens
        return
    if before is None:
        assert rest is whole and cut <= 0
        return
    assert before.total_tokens == cut
    for token_class, quantity in token_classes(whole).items():
        part = token_classes(before)[token_class]
        quota = Fraction(cut * quantity, whole.total_tokens)
        assert math.floor(quota) <= part <= math.ceil(quota)
        assert part + token_classes(rest)[token_class] == quantity
    assert before.share + rest.share == 1 and before.requests + rest.requests == whole.requests
    # A part split again is a part of the same whole, its share the whole's share of it.
    second, third = split_at(rest, again)
    parts = [p for p in (before, second, third) if p is not None]
    assert all(p.part_of is whole for p in parts)
    assert sum(p.share for p in parts) == 1
    assert sum(p.total_tokens for p in parts) == whole.total_tokens


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), max_size=12),
    allowance=st.integers(0, 5 * 10**6),
    tiers=st.sets(st.integers(0, 8 * 10**6), max_size=3),
)
def test_no_free_token_is_ever_forfeited_and_each_tier_begins_after_its_first_tokens(
    sizes, allowance, tiers
):
    """Under one paid contract the month's free tokens are exactly min(allowance, its
    tokens), and a tier's discount applies to exactly the paid tokens beyond its boundary."""
    items = [item(at(2 + i % 20, i % 24), input_=a, output=b, id_=str(i))
             for i, (a, b) in enumerate(sizes)]  # fmt: skip
    starts = sorted(tiers)
    volume = tuple(VolumeTier(from_tokens=t, discount_pct=D(n + 1)) for n, t in enumerate(starts))
    rated = rate_january(
        items, contracts=[paid(free_tokens_per_month=allowance, volume_tiers=volume)]
    )

    total = sum(i.total_tokens for i in items)
    assert rated.unsold_tokens[UnsoldReason.ALLOWANCE] == min(allowance, total)
    sold = max(total - allowance, 0)
    assert rated.paid_tokens == sold
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else sold
        in_tier = [r.item for r in rated.items if r.is_paid and r.tier_discount_pct == n + 1]
        assert sum(i.total_tokens for i in in_tier) == max(min(sold, end) - start, 0)
    for whole in items:
        parts = [r.item for r in rated.items if r.item.whole is whole]
        assert sum(p.total_tokens for p in parts) == whole.total_tokens


# --- properties -------------------------------------------------------------------

_pct = st.decimals(min_value=0, max_value=100, places=2)
_price = st.decimals(min_value=0, max_value=100, places=10)


@st.composite
def _months(draw):
    models = ["a", "b"]
    book = [
        PriceVersion(
            model=model,
            token_class=tc,
            per_million=draw(_price),
            effective_from=JAN + timedelta(hours=hour),
        )
        for model in models
        for tc in TokenClass
        for hour in sorted({0, draw(st.integers(0, 743))})
    ]
    tiers = tuple(
        VolumeTier(from_tokens=start, discount_pct=draw(_pct))
        for start in sorted(draw(st.sets(st.integers(0, 5_000_000), max_size=3)))
    )
    contracts = [
        ContractVersion(
            effective_from=JAN,
            kind=draw(st.sampled_from(list(ContractKind))),
            discount_pct=draw(_pct),
            free_tokens_per_month=draw(st.integers(0, 2_000_000)),
            volume_tiers=tiers,
            committed_minimum=draw(st.decimals(min_value=0, max_value=50, places=2)),
        ),
        ContractVersion(
            effective_from=JAN + timedelta(hours=draw(st.integers(1, 743))),
            kind=ContractKind.PAID,
            discount_pct=draw(_pct),
            volume_tiers=tiers,
        ),
    ]
    items = []
    for index in range(draw(st.integers(0, 25))):
        input_tokens = draw(st.integers(0, 2**31 - 1))
        items.append(
            UsageItem(
                time=JAN + timedelta(seconds=draw(st.integers(0, 31 * 86400 - 1))),
                model=draw(st.sampled_from(models)),
                input_tokens=input_tokens,
                cached_tokens=draw(st.integers(0, input_tokens)),
                output_tokens=draw(st.integers(0, 2**31 - 1)),
                id=str(index),
                requests=draw(st.integers(0, 1_000)),
            )
        )
    promotions = [
        PromotionalCredit(
            id=f"p{index}",
            amount=draw(st.decimals(min_value=0, max_value=20_000, places=2)),
            expires_at=draw(st.none() | st.just(JAN + timedelta(days=draw(st.integers(0, 40))))),
        )
        for index in range(draw(st.integers(0, 2)))
    ]
    return items, contracts, book, promotions


@settings(max_examples=300, deadline=None)
@given(month=_months(), seed=st.integers(0, 2**32 - 1))
def test_rate_month_total_is_sum_of_rounded_lines_and_realized_within_list(month, seed):
    items, contracts, book, promotions = month

    rated = rate_january(items, contracts=contracts, book=book, promotions=promotions)

    assert rated.total == sum((line.amount for line in rated.lines), D(0))
    for line in rated.lines:
        for value in (line.list_amount, line.discount, line.amount):
            assert value == round_money(amount=value, currency="USD")
        assert line.discount == line.list_amount - line.amount
    assert rated.realized_amount <= rated.list_value
    assert 0 <= rated.realized_after_promotions <= rated.realized_amount
    assert all(
        0 <= r.realized_after_promotions <= r.realized_amount <= r.list_value for r in rated.items
    )
    assert rated.total >= 0
    paid_quantity = sum(line.quantity for line in rated.lines if line.kind == LineKind.USAGE)
    assert paid_quantity == sum(r.item.total_tokens for r in rated.items if r.is_paid)
    assert rated.paid_tokens + sum(rated.unsold_tokens.values()) == sum(
        i.total_tokens for i in items
    )
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    again = rate_january(shuffled, contracts=contracts, book=book, promotions=promotions)
    assert again.lines == rated.lines


def test_classes_without_a_price_of_their_own_take_their_parents_on_a_hand_computed_invoice():
    """kpis.md section 3, "Token classes": llama has a cache-write price, and a reasoning
    price from Jan 16 only; r1 has a reasoning price and no cache-write price. Each line
    says the class whose price it used; a month in which reasoning gains its own price has
    two reasoning lines. 10% contract discount; every line rounded once, half-up."""
    book = [
        *prices(),
        PriceVersion(model="llama", token_class="cache_write", per_million=D("1.25"),
                     effective_from=JAN),
        PriceVersion(model="llama", token_class="reasoning", per_million=D("2.50"),
                     effective_from=at(16)),
        *prices("r1", input_="0.55", cached="0.14", output="2.19"),
        PriceVersion(model="r1", token_class="reasoning", per_million=D("2.40"),
                     effective_from=JAN),
    ]  # fmt: skip
    items = [
        item(at(3), input_=1_000_000, cached=200_000, cache_write=300_000, output=400_000,
             reasoning=100_000),
        item(at(20), output=1_000_000, reasoning=600_000),
        item(at(5), model="r1", input_=2_000_000, cached=500_000, cache_write=500_000,
             output=3_000_000, reasoning=2_000_000),
    ]  # fmt: skip

    rated = rate_january(items, contracts=[paid(discount_pct=D(10))], book=book)

    lines = [line for line in rated.lines if line.kind == LineKind.USAGE]
    assert [
        (line.model, line.token_class, line.price_class, line.quantity, line.list_unit_price,
         line.list_amount, line.amount)
        for line in lines
    ] == [
        ("llama", "input", "input", 500_000, D("1.00"), D("0.50"), D("0.45")),
        ("llama", "cached_input", "cached_input", 200_000, D("0.50"), D("0.10"), D("0.09")),
        # 0.375 and 0.3375, each rounded once
        ("llama", "cache_write", "cache_write", 300_000, D("1.25"), D("0.38"), D("0.34")),
        ("llama", "output", "output", 700_000, D("2.00"), D("1.40"), D("1.26")),
        ("llama", "reasoning", "output", 100_000, D("2.00"), D("0.20"), D("0.18")),
        ("llama", "reasoning", "reasoning", 600_000, D("2.50"), D("1.50"), D("1.35")),
        ("r1", "input", "input", 1_000_000, D("0.55"), D("0.55"), D("0.50")),  # 0.495
        ("r1", "cached_input", "cached_input", 500_000, D("0.14"), D("0.07"), D("0.06")),
        ("r1", "cache_write", "input", 500_000, D("0.55"), D("0.28"), D("0.25")),  # 0.275
        ("r1", "output", "output", 1_000_000, D("2.19"), D("2.19"), D("1.97")),  # 1.971
        ("r1", "reasoning", "reasoning", 2_000_000, D("2.40"), D("4.80"), D("4.32")),
    ]  # fmt: skip
    assert rated.total == D("10.77")
    assert rated.list_value == D("11.96")  # 4.075 + 7.885, unrounded
    assert rated.realized_amount == D("10.764")
    assert "reasoning tokens at 2 per million (priced as output)" in lines[4].description
    assert "priced as" not in lines[5].description
    assert "cache write tokens at 0.55 per million (priced as input)" in lines[8].description
    # The allowance and tiers count tokens as before: input + output, classes inside them.
    assert rated.paid_tokens == 1_400_000 + 1_000_000 + 5_000_000


def test_a_class_without_its_own_price_nor_a_parent_is_a_rating_error_naming_it():
    book = [p for p in prices() if p.token_class != TokenClass.CACHED_INPUT]
    with pytest.raises(RatingError, match="no cached_input list price") as caught:
        rate_january([item(at(3), input_=10, cached=5, output=1)], book=book)
    assert caught.value.token_class == TokenClass.CACHED_INPUT
    without_output = [p for p in prices() if p.token_class != TokenClass.OUTPUT]
    with pytest.raises(RatingError, match="no reasoning list price") as caught:
        rate_january([item(at(3), input_=10, output=4, reasoning=4)], book=without_output)
    assert caught.value.token_class == TokenClass.REASONING
