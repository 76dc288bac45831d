"""Bounded work per request (kpis.md section 0): every read operation of the schema, called
by each role with the widest parameters its validation accepts (a 3-year period, the
largest page), runs no more queries than over one month, because the work follows the data
(months holding usage) and not the length of the period; a longer period, a bound outside
2000–2100 or an impossible date is a 400 naming the parameter, after a handful of queries."""

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.reliability.operations import schema
from tests.reliability.world import ROLES, bearer

pytestmark = pytest.mark.postgres_only

# The test clock is 2026-12-16 10:00 UTC (tests/conftest.py); the world's usage is in March.
MONTH = {"period": "2026-03"}
WIDEST = {"from": "2023-12-16T10:00:00Z", "to": "2026-12-16T10:00:00Z"}
REFUSED = [
    ({"from": "2023-12-16T09:00:00Z", "to": "2026-12-16T10:00:00Z"}, "to"),  # 3 years + 1 h
    ({"from": "1000-01-01", "to": "2026-01-01"}, "from"),
    ({"from": "2026-01-01", "to": "9999-12-31"}, "to"),
    ({"from": "2026-13-01"}, "from"),
    ({"period": "2026-03", "from": "2026-03-01"}, "period"),
]


def _reads() -> list[tuple[str, set[str]]]:
    """Every GET operation without path parameters that takes a period, with its query
    parameter names."""
    reads = []
    for path, item in schema()["paths"].items():
        if "get" in item and "{" not in path:
            names = {p["name"] for p in item["get"].get("parameters", []) if p["in"] == "query"}
            if {"from", "to"} <= names:
                reads.append((path, names))
    return reads


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer(user)}")
    return client


class _Work:
    """Queries run and rows they returned (the cursor's rowcount after each statement)."""

    def __init__(self) -> None:
        self.queries = self.rows = 0

    def __call__(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        self.queries += 1
        self.rows += max(context["cursor"].rowcount, 0)
        return result


def _call(client, path: str, params: dict):
    work = _Work()
    with connection.execute_wrapper(work):
        response = client.get(path, params)
    return response, work


def test_every_read_operation_takes_a_period():
    paths = {path for path, names in _reads() if "period" in names}

    assert paths == {
        "/api/v1/flywheel/diagnosis",
        "/api/v1/incidents/",
        "/api/v1/kpis",
        "/api/v1/ledger/",
        "/api/v1/maintenance/",
        "/api/v1/market",
        "/api/v1/sla",
        "/api/v1/tfom",
        "/api/v1/usage",
    }


@pytest.mark.parametrize("role", ROLES)
def test_every_read_does_no_more_work_over_three_years_than_over_a_month(world, role):
    client = _client(world.users[role])
    grown = {}
    for path, names in _reads():
        largest = {"page_size": 1000} if "page_size" in names else {}
        month, month_work = _call(client, path, {**MONTH, **largest})
        widest, widest_work = _call(client, path, {**WIDEST, **largest})
        if month.status_code == 403:  # the role may not read it: refused alike
            assert widest.status_code == 403, path
            continue
        assert month.status_code == 200, (path, month.content)
        # Before the pools' cost models took effect TFOM cannot be costed: a 400 naming it.
        assert widest.status_code == 200 or widest.json()["errors"][0]["field"], path
        if widest_work.queries > month_work.queries or widest_work.rows > month_work.rows:
            grown[path] = (vars(month_work), vars(widest_work))

    assert grown == {}


@pytest.mark.parametrize(("params", "field"), REFUSED)
def test_every_read_refuses_an_unbounded_period_naming_it(world, params, field):
    client = _client(world.users["operator"])
    for path, _ in _reads():
        response, work = _call(client, path, params)

        assert response.status_code == 400, (path, params)
        assert response.json()["errors"][0]["field"] == field, (path, response.json())
        assert work.queries <= 6, (path, work.queries)  # authentication, the token's use
