"""The money filter of every page: separators, cents, and never a negative zero."""

from decimal import Decimal

import pytest

from portal.templatetags.portal import money


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Decimal("-1234.5"), "-1,234.50"),
        (Decimal("8817765.385"), "8,817,765.39"),  # half-up, like the ledger
        (Decimal("-0.004"), "0.00"),  # a tie-out difference below a cent is no "-0.00"
        (None, "—"),
    ],
)
def test_money_shows_cents_with_separators(value, shown):
    assert money(value) == shown


def test_memo_numbers_read_as_people_write_them():
    """The ledger memo said '1E+1% of 595823.32': percentages positional, money grouped."""
    from portal.formatting import decimal_plain, money_text

    assert decimal_plain(Decimal("10")) == "10"
    assert decimal_plain(Decimal("10.00")) == "10"
    assert decimal_plain(Decimal("2.50")) == "2.5"
    assert decimal_plain(Decimal("0E-10")) == "0"
    assert money_text(amount=Decimal("595823.315"), currency="USD") == "595,823.32 USD"
    assert money_text(amount=Decimal("1234"), currency="JPY") == "1,234 JPY"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Decimal("100.495"), "101"),  # 100.50 in cents, then 101: the same as the cents page
        (Decimal("1234567.4949"), "1,234,567"),
        (Decimal("-0.4"), "0"),
        (None, "—"),
    ],
)
def test_money_in_whole_units_rounds_the_cents_figure(value, shown):
    from portal.templatetags.portal import money_whole

    assert money_whole(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [("-0.0004", "0.0%"), ("-0.0006", "-0.1%"), ("0", "0.0%"), ("0.4271", "42.7%"), (None, "—")],
)
def test_ratio_pct_never_shows_minus_zero(value, shown):
    from portal.templatetags.portal import ratio_pct

    assert ratio_pct(None if value is None else Decimal(value)) == shown


def test_long_names_break_after_separators_and_numbers_never_inside():
    """An alert's figures read "target 0.97 · window end 2026-12-05 19:00 UTC": it broke as
    "0. 97" and "19: 00"; names still break after their separators."""
    from portal.templatetags.portal import breakable

    assert breakable("target 0.97 · window end 2026-12-05 19:00 UTC") == (
        "target 0.97 · window end 2026-12-05 19:00 UTC"
    )
    assert breakable("deepseek-r1@b200-a") == "deepseek-<wbr>r1@<wbr>b200-<wbr>a"
    assert breakable("https://hooks.example.com/a") == (
        "https://<wbr>hooks.<wbr>example.<wbr>com/<wbr>a"
    )
