"""Market figures from the published read models (kpis.md 4b): the ledger's revenue per
tenant for a whole closed month (a credit note dated in it lowers that tenant's share), the
rating for other parts, retention of a closed month by hand, GET /api/v1/market.

The tests only read `books_open` (tests/flywheel/conftest.py): it is built once for the
module, each test in a savepoint inside it; `books` closes March in the test's savepoint."""

import copy
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from flywheel.domain.kpis import ratio_of
from flywheel.selectors.market import market_read
from flywheel.selectors.tfom import tfom_measure
from metering.models import Pool
from metering.selectors.usage import window_resolve
from portal.models import Tenant
from tests.conftest import users_make, world_of_module
from tests.flywheel.conftest import books_open_build

D = Decimal
M = 1_000_000
FEB, MARCH, APRIL = (datetime(2026, m, 1, tzinfo=UTC) for m in (2, 3, 4))


@pytest.fixture(scope="module")
def _books_of_module(django_db_setup, django_db_blocker):
    with world_of_module(django_db_blocker):
        tenant_a = Tenant.objects.create(slug="tenant-a", name="Tenant A")
        tenant_b = Tenant.objects.create(slug="tenant-b", name="Tenant B")
        users = users_make(tenant_a)
        yield tenant_a, tenant_b, users, books_open_build(users, tenant_a, tenant_b)


@pytest.fixture
def tenant_a(_books_of_module, db):
    return copy.deepcopy(_books_of_module[0])


@pytest.fixture
def tenant_b(_books_of_module, db):
    return copy.deepcopy(_books_of_module[1])


@pytest.fixture
def users(_books_of_module, db):
    return copy.deepcopy(_books_of_module[2])


@pytest.fixture
def books_open(_books_of_module, db):
    return _books_of_module[3]


def market_pool() -> str:
    return Pool.objects.get().slug


@pytest.mark.both_backends
def test_market_of_a_closed_month_takes_the_ledgers_revenue_per_tenant(books):
    market = market_read(window_resolve({"period": "2026-03"}))
    # The ledger dates the credit note in March: A's March is 35.20 − 5.00 = 30.20 (the rating
    # alone would say 35.20); B 8.80; C nothing. 39.00 in all.
    assert [source for _, source in market.parts] == ["ledger"]
    assert market.revenue == {"tenant-a": D("30.20"), "tenant-b": D("8.80")}
    c = market.concentration
    assert c.top1 == ratio_of(D("30.20"), D("39.00"))  # 0.7743…, not 35.20 / 44.00 = 0.8
    assert c.top5 == D(1)
    # (30.20² + 8.80²) / 39² = 989.48 / 1521 = 0.6505…
    assert c.hhi == pytest.approx(D("989.48") / D(1521), abs=D("1e-27"))
    assert c.grade == "highly concentrated"
    # Paid tokens from the rating: A 40 M, B 10 M
    a, b = market.quadrant.points
    assert (a.tenant, a.paid_tokens, a.x, a.y) == ("tenant-a", 40 * M, D("0.8"), D("0.755"))
    assert (b.tenant, b.paid_tokens, b.x, b.y) == ("tenant-b", 10 * M, D("0.2"), D("0.88"))
    # the medians of two tenants: x 0.5, y 0.8175 per million
    assert (market.quadrant.x_median, market.quadrant.y_median) == (D("0.5"), D("0.8175"))
    assert (a.label, b.label) == ("volume", "premium")
    # MRR is March's, per the ledger; ARR twelve times it
    assert (market.mrr_month, market.mrr, market.mrr_source) == (MARCH, D("39.00"), "ledger")
    assert market.arr == D("468.00")
    # finance's TFOM revenue of the month is the same figure
    assert tfom_measure(scope="factory", start=MARCH, end=APRIL).revenue == D("39.00")


@pytest.mark.both_backends
def test_tfom_revenue_of_an_open_month_subtracts_the_credit_notes_dated_in_it(books_open):
    """kpis.md section 5: revenue − credit notes dated in P, the ledger's only for closed
    months. March is open: the rating says A 35.20 + B 8.80 = 44.00, and the credit note of
    5.00 dated 10 March (on February's invoice) makes it 39.00, the cockpit's figure too."""
    march = tfom_measure(scope="factory", start=MARCH, end=APRIL)
    assert (march.revenue_rated, march.revenue_dated, march.revenue_tie_out) == (
        D("44.00"),
        D("-5.00"),
        D(0),
    )
    assert march.revenue == D("39.00")
    market = market_read(window_resolve({"period": "2026-03"}))
    assert [source for _, source in market.parts] == ["rating"]
    assert market.revenue == {"tenant-a": D("30.20"), "tenant-b": D("8.80")}
    assert market.total == march.revenue
    # The one pool takes all of it (its share of the realized revenue is 1)
    assert tfom_measure(scope=market_pool(), start=MARCH, end=APRIL).revenue == D("39.00")
    # February is closed: the ledger's 26.40, the credit note dated in March not in it
    february = tfom_measure(scope="factory", start=FEB, end=MARCH)
    assert (february.revenue, february.revenue_dated) == (D("26.40"), D(0))


@pytest.mark.both_backends
def test_tfom_revenue_of_parts_of_a_closed_month_takes_the_credit_notes_dated_inside(books):
    # The whole of March is the ledger's (39.00: the credit note inside its tie-out of
    # −5.00); its halves are the rating's, the first with the credit note of the 10th.
    march = tfom_measure(scope="factory", start=MARCH, end=APRIL)
    assert (march.revenue, march.revenue_dated, march.revenue_tie_out) == (
        D("39.00"),
        D(0),
        D("-5.00"),
    )
    early = tfom_measure(scope="factory", start=MARCH, end=datetime(2026, 3, 15, tzinfo=UTC))
    assert (early.revenue_rated, early.revenue_dated, early.revenue) == (
        D("35.20"),
        D("-5.00"),
        D("30.20"),
    )
    late = tfom_measure(scope="factory", start=datetime(2026, 3, 15, tzinfo=UTC), end=APRIL)
    assert (late.revenue_dated, late.revenue) == (D(0), D("8.80"))


@pytest.mark.both_backends
def test_retention_of_march_against_february_by_hand(books):
    market = market_read(window_resolve({"period": "2026-03"}))
    rows = {row.lookback: row for row in market.retention}
    # February: A 17.60, C 8.80 (26.40). March: A 30.20 (grew), C 0 (left); B is new.
    assert rows[1].base == FEB
    assert rows[1].nrr == ratio_of(D("30.20"), D("26.40"))  # 1.1439…
    assert rows[1].grr == ratio_of(D("17.60"), D("26.40"))  # A capped at its February: 2/3
    assert market.headline is rows[1]
    # In service since January: three and twelve months back are before it
    for lookback in (3, 12):
        assert rows[lookback].nrr is None
        assert rows[lookback].reason.startswith(f"not enough history: a {lookback}-month NRR")
        assert "in service since 1 January 2026" in rows[lookback].reason


@pytest.mark.both_backends
def test_market_reads_the_rating_for_parts_of_a_closed_month(books):
    # 15 March onwards: the rating (A's 35.20 is on the 10th: outside), the credit note of
    # the 10th outside too; before the 15th: A's usage less the credit note dated inside.
    late = market_read(window_resolve({"from": "2026-03-15", "to": "2026-04-01"}))
    assert [source for _, source in late.parts] == ["rating"]
    assert late.revenue == {"tenant-b": D("8.80")}
    early = market_read(window_resolve({"from": "2026-03-01", "to": "2026-03-15"}))
    assert early.revenue == {"tenant-a": D("30.20")}


@pytest.mark.both_backends
def test_cohorts_group_by_first_month_with_revenue(books):
    market = market_read(window_resolve({"from": "2026-02-01", "to": "2026-04-01"}))
    assert [p.month for p in market.cohort_parts] == [FEB, MARCH]
    table = [(c.month, c.tenants, c.revenue) for c in market.cohorts]
    # February's cohort: A and C (17.60 + 8.80 = 26.40, then A's 30.20); March's: B
    assert table == [(FEB, 2, [D("26.40"), D("30.20")]), (MARCH, 1, [D(0), D("8.80")])]


def test_market_api_reads_for_staff_and_refuses_tenants(books, make_user, client, tenant_a):
    for role in ("operator", "finance", "investor"):
        client.force_login(make_user(role, username=f"{role}-market"))
        response = client.get("/api/v1/market?period=2026-03")
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["revenue"] == "39.00"
        assert body["concentration"]["grade"] == "highly concentrated"
        assert body["mrr"] == "39.00"
        assert body["arr"] == "468.00"
        assert body["revenue_sources"] == [
            {"from": "2026-03-01T00:00:00Z", "to": "2026-04-01T00:00:00Z", "source": "ledger"}
        ]
        tenants = {t["tenant"]: t for t in body["quadrant"]["tenants"]}
        assert tenants["tenant-a"]["y"] == "0.7550000000"
        assert [r["lookback_months"] for r in body["retention"]] == [12, 3, 1]
        assert body["retention"][2]["nrr"] == pytest.approx(30.20 / 26.40)
        assert body["retention"][0]["reason"].startswith("not enough history")
        assert body["empty_reason"] is None
    client.force_login(make_user("tenant", tenant=tenant_a, username="member-market"))
    assert client.get("/api/v1/market?period=2026-03").status_code == 403


def test_market_api_queries_do_not_grow_with_the_months_read(books, users, client):
    client.force_login(users["operator"])
    assert client.get("/api/v1/market").status_code == 200  # the session's first reads
    counts = []
    for start in ("2025-03-15", "2024-03-15"):  # one and two years, each ending mid-month
        with CaptureQueriesContext(connection) as queries:
            response = client.get(f"/api/v1/market?from={start}&to=2026-03-15")
        assert response.status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_market_api_names_a_bad_period(users, client):
    client.force_login(users["investor"])
    response = client.get("/api/v1/market?from=2020-01-01&to=2026-01-01")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] in ("to", "from")
