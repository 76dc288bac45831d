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
