"""portal.alert_kinds.scope_naming: the one rule of a kind's scope that names at most one thing."""

import pytest

from portal.alert_kinds import scope_naming
from portal.errors import FieldError

TARGETS = {1, 7}  # True == 1: a bool is refused all the same
check = scope_naming(
    "scrape_target", exists=TARGETS.__contains__, expected="the id of a scrape target", of_type=int
)


@pytest.mark.parametrize("scope", [{}, {"scrape_target": 7}])
def test_a_scope_naming_nothing_or_what_exists_is_kept(scope):
    assert check(scope) is scope


@pytest.mark.parametrize("value", [8, "7", True, None, 7.0])
def test_a_scope_naming_what_does_not_exist_or_of_another_type_names_its_key(value):
    with pytest.raises(FieldError) as raised:
        check({"scrape_target": value})
    assert (raised.value.field, raised.value.message) == (
        "scope.scrape_target",
        "the id of a scrape target",
    )
