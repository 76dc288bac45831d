"""portal.money.apportion: largest remainder in integers, against the definition in
Fractions (kpis.md 3e: each key its quota's whole part, one more unit to the largest
remainders, a tie to the key listed first)."""

from decimal import Decimal
from fractions import Fraction
from math import floor

import pytest
from hypothesis import given
from hypothesis import strategies as st

from portal.money import apportion, split_money


def _by_definition(weights: dict, units: int) -> dict:
    exact = {key: Fraction(weight) for key, weight in weights.items()}
    total = sum(exact.values(), Fraction(0))
    quotas = {key: units * w / total if total else Fraction(0) for key, w in exact.items()}
    allocated = {key: floor(quota) for key, quota in quotas.items()}
    left = units - sum(allocated.values())
    rank = {key: index for index, key in enumerate(quotas)}
    for key in sorted(quotas, key=lambda key: (-(quotas[key] - allocated[key]), rank[key]))[:left]:
        allocated[key] += 1
    return allocated


weight = st.one_of(
    st.integers(0, 10**9),
    st.decimals(min_value=0, max_value=10**6, places=12, allow_nan=False),
    st.decimals(min_value=0, max_value=10**6, places=2, allow_nan=False),
    st.fractions(min_value=0, max_value=1000, max_denominator=10**6),
)


@given(weights=st.lists(weight, min_size=1, max_size=25), units=st.integers(0, 10**9))
def test_apportion_is_the_largest_remainder_of_its_definition(weights, units):
    keyed = {f"p{index}": w for index, w in enumerate(weights)}
    if units and not any(keyed.values()):
        with pytest.raises(ValueError, match="cannot apportion"):
            apportion(keyed, units)
        return
    parts = apportion(keyed, units)
    assert parts == _by_definition(keyed, units)
    assert list(parts) == list(keyed) and sum(parts.values()) == units


def test_ties_go_to_the_key_listed_first():
    """Three equal weights and 100 cents: 33 each, the cent left to the first; 2 cents by
    1:1:1 go to the first two; the order of the weights decides, not the keys."""
    assert apportion({"b": 1, "a": 1, "c": 1}, 100) == {"b": 34, "a": 33, "c": 33}
    assert apportion({"b": Decimal("0.5"), "a": Fraction(1, 2), "c": 0.5}, 2) == {
        "b": 1, "a": 1, "c": 0,
    }  # fmt: skip
    # kpis.md 3e's split of 14,929.92 by 3:1:1: 895,795.2, 298,598.4, 298,598.4 cents
    assert split_money(amount=Decimal("14929.92"), weights={0: 3, 1: 1, 2: 1}, currency="USD") == {
        0: Decimal("8957.95"),
        1: Decimal("2985.99"),
        2: Decimal("2985.98"),
    }
