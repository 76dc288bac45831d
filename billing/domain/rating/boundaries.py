"""Boundaries split events, they never forfeit tokens (kpis.md section 3).

An item that crosses a boundary (the free allowance, a volume tier, a reservation's capacity
in kpis.md 3d) is cut there in whole tokens: the part before the boundary holds exactly the
tokens left before it, allocated across the item's token classes in proportion to their
quantities by largest remainder (ties to the class listed first in TokenClass), and the rest
of the item is the other part. Both parts keep the item's time, keys and latency (their
event's, `UsageItem.whole`); its requests, list value and production split in proportion to
tokens (`UsageItem.share`, exact fractions).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from math import floor

from billing.domain.rating.types import TokenClass, UsageItem
from portal.money import apportion


def token_classes(item: UsageItem) -> dict[TokenClass, int]:
    """Split an item's counts into priced classes (`class_quantities`)."""
    return class_quantities(
        input_tokens=item.input_tokens,
        cached_tokens=item.cached_tokens,
        cache_write_tokens=item.cache_write_tokens,
        output_tokens=item.output_tokens,
        reasoning_tokens=item.reasoning_tokens,
    )


def class_quantities(
    *,
    input_tokens: int,
    cached_tokens: int,
    cache_write_tokens: int,
    output_tokens: int,
    reasoning_tokens: int,
) -> dict[TokenClass, int]:
    """Split token counts into priced classes, each token in exactly one (kpis.md section
    3): uncached input, cached input, cache writes, output, reasoning."""
    return {
        TokenClass.INPUT: input_tokens - cached_tokens - cache_write_tokens,
        TokenClass.CACHED_INPUT: cached_tokens,
        TokenClass.CACHE_WRITE: cache_write_tokens,
        TokenClass.OUTPUT: output_tokens - reasoning_tokens,
        TokenClass.REASONING: reasoning_tokens,
    }


def largest_remainder(quantities: dict[TokenClass, int], tokens: int) -> dict[TokenClass, int]:
    """`tokens` (0 <= tokens <= their sum) allocated across the classes in proportion to
    `quantities` (`apportion`), a tie to the class listed first."""
    total = sum(quantities.values())
    if not 0 <= tokens <= total:
        raise ValueError(f"cannot allocate {tokens} of {total} tokens")
    return apportion(quantities, tokens)


def split_at(item: UsageItem, tokens: int) -> tuple[UsageItem | None, UsageItem | None]:
    """The item cut at `tokens` total tokens (input + output): (the part before, the rest).
    A boundary at or beyond the item's end leaves it whole before it, (item, None); one at
    or before its start, after it, (None, item). A part of an item split before is a part
    of the same whole (its event)."""
    total = item.total_tokens
    if tokens >= total:
        return item, None
    if tokens <= 0:
        return None, item
    classes = token_classes(item)
    before = largest_remainder(classes, tokens)
    after = {tc: quantity - before[tc] for tc, quantity in classes.items()}
    return _part(item, before), _part(item, after)


def split_at_production(
    item: UsageItem, *, left: Fraction, production: Fraction
) -> tuple[UsageItem | None, UsageItem | None]:
    """The item cut where `left` of its `production` (tok(e), output-token units) is reached:
    at ⌊left ÷ production × its total tokens⌋ (kpis.md 3d, a reservation's capacity left).
    Nothing produced: the item is before the boundary while any of it is left."""
    if production <= 0:
        return (item, None) if left > 0 else (None, item)
    return split_at(item, floor(Fraction(left) / Fraction(production) * item.total_tokens))


def _part(item: UsageItem, classes: dict[TokenClass, int]) -> UsageItem:
    whole = item.whole
    input_tokens = (
        classes[TokenClass.INPUT]
        + classes[TokenClass.CACHED_INPUT]
        + classes[TokenClass.CACHE_WRITE]
    )
    output_tokens = classes[TokenClass.OUTPUT] + classes[TokenClass.REASONING]
    share = Fraction(input_tokens + output_tokens, whole.total_tokens)
    return replace(
        item,
        input_tokens=input_tokens,
        cached_tokens=classes[TokenClass.CACHED_INPUT],
        cache_write_tokens=classes[TokenClass.CACHE_WRITE],
        output_tokens=output_tokens,
        reasoning_tokens=classes[TokenClass.REASONING],
        requests=whole.requests * share,
        part_of=whole,
    )
