"""Figures as people read them, in one place for pages, memos, invoice lines, alerts,
emails and exports: token counts as M/B/T, decimals without exponent, ratios as
percentages, money grouped with its currency, recorded figures grouped to at most four
decimals. Pure Python: the domains may import it (portal.templatetags wraps it for
templates)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from portal.money import round_half_up, round_money

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


def percent_text(ratio, decimals: int = 1) -> str:
    """A ratio as a percentage: 0.4484 → 44.8% (uptime and attainment take 3 decimals:
    99.862%); a small negative shows as 0.0%, never -0.0%; — for nothing."""
    if ratio is None:
        return "—"
    text = f"{float(ratio) * 100:.{int(decimals)}f}"
    if text.startswith("-") and not text.strip("-0."):
        text = text[1:]
    return f"{text}%"


FIGURE_DECIMALS = 4  # a recorded figure shown beyond it is machine text (0.44841059629754854)


def number_text(number: Decimal, *, trailing_zeros: bool = True) -> str:
    """A recorded number as people read it: grouped, at most FIGURE_DECIMALS decimals
    (rounded half up; the exact figure stays in the record), its own trailing zeros kept
    (1,193.60) unless `trailing_zeros` is False (60000.0000 → 60,000); never -0."""
    if number.as_tuple().exponent < -FIGURE_DECIMALS:  # type: ignore[operator]
        number = round_half_up(amount=number, quantum=Decimal(10) ** -FIGURE_DECIMALS)
        number = number.normalize()
    elif not trailing_zeros:
        number = number.normalize()
    return format(number, ",f") if number else "0"


_NUMBER = re.compile(r"-?\d+\.\d+|-?\d{5,}")


def recorded_value(value, *, number: Callable[[Decimal], str] = number_text) -> str:
    """A recorded (JSON) value as people read it (an alert's figures, a notification's data,
    an audit entry): — for nothing, yes/no, lists joined, dicts as "key words: value",
    instants in UTC to the minute; `number` writes the numbers."""
    if value is None or value == "":
        return "—"
    if value is True or value is False:
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(recorded_value(item, number=number) for item in value) or "—"
    if isinstance(value, dict):
        pairs = (
            f"{words(key)}: {recorded_value(item, number=number)}" for key, item in value.items()
        )
        return "; ".join(pairs) or "—"
    if isinstance(value, str) and (moment := _instant(value)) is not None:
        return f"{moment:%Y-%m-%d %H:%M} UTC"
    if isinstance(value, int | float | Decimal) or (
        isinstance(value, str) and _NUMBER.fullmatch(value)
    ):
        return number(Decimal(str(value)))
    return str(value)


def words(key) -> str:
    """An identifier as words: threshold_pct → threshold pct, no_contract → no contract."""
    return str(key).replace("_", " ")


_INSTANT = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d")


def _instant(text: str) -> datetime | None:
    """An instant with its zone, RFC 3339 or as Python writes one (2026-12-16T10:00:00Z,
    2026-12-06 09:37:14.988712+00:00), in UTC; None otherwise."""
    if not _INSTANT.match(text):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo else None


def span_text(start: datetime, end: datetime) -> str:
    """A half-open period [start, end) as people name it: whole UTC days by their first and
    last day ("29 Nov – 5 Dec 2026"), other bounds to the minute ("2026-11-07 00:00 –
    2026-12-06 08:00 UTC")."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    if start.time() == end.time() == datetime.min.time():
        last = end - timedelta(days=1)
        if last <= start:
            return f"{start.day} {start:%b %Y}"
        first = f"{start.day} {start:%b}" + (f" {start:%Y}" if start.year != last.year else "")
        return f"{first} – {last.day} {last:%b %Y}"
    return f"{start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M} UTC"
