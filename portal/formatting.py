"""Figures as people read them, in one place for pages, memos, invoice lines and exports:
token counts as M/B/T, decimals without exponent, money grouped with its currency. Pure
Python: the domains may import it (portal.templatetags wraps it for templates)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from portal.money import round_money

_SCALES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def tokens_short(value) -> str:
    """12.4 M / 3.1 B / 2.0 T style (one decimal), — for nothing."""
    if value is None:
        return "—"
    number = float(value)
    for limit, suffix in _SCALES:
        if abs(number) >= limit:
            return f"{number / limit:.1f} {suffix}"
    return f"{number:.0f}"


def decimal_plain(value: Decimal) -> str:
    """A decimal as positional text without trailing zeros: 10 (not 1E+1), 2.5, 0."""
    text = f"{value.normalize():f}"
    return "0" if text in ("-0", "") else text


def money_text(*, amount: Decimal, currency: str) -> str:
    """An amount as people read it in a memo or a line: 595,823.32 USD."""
    return f"{round_money(amount=amount, currency=currency):,} {currency}"


def rfc3339(moment: datetime) -> str:
    """An instant as RFC 3339 text in UTC, as every API shape and event writes one:
    2026-12-16T10:00:00Z."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
