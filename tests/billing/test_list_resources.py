"""One read per list resource: the page, the API and the CSV of a list give the same rows for
the same filters, for every role that may read it (each reads through the resource's one
selector and FilterSet; a member sees its own tenant's rows).

The world: tenants A and B each used llama-70b on h100-a in March (17.60 list, A at 25% off,
B at 10% off), A also qwen-7b on l40s-b; the March close issued both invoices and posted
them; A's invoice got a 1.00 credit note to its balance; on 3 March an incident on
llama-70b@h100-a touched A and B (resolved) and one on the pool l40s-b touched A (open);
each tenant holds a budget rule whose 50% alert is resolved, A's 100% alert firing; every
write left an audit entry; B has a 5.00 promotional credit from April; A, B and the factory
each have a webhook endpoint."""

import copy
import csv
import io
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import NamedTuple

import pytest

from billing.services.close import close_run
from billing.services.credit_notes import credit_note_issue
from billing.services.pricing import promotion_grant
from metering.models import Deployment, Incident, Pool
from metering.services.sla.incidents import incident_create
from portal.alerts import rule_create
from portal.models import Alert, Tenant
from portal.webhooks import endpoint_create
from tests.billing.factories import (
    MARCH,
    MARCH_USAGE,
    make_march_usage,
    make_priced_model,
    post_usage,
)
from tests.conftest import DEFAULT_NOW, token_client_make, users_make, world_of_module

pytestmark = pytest.mark.both_backends

READS = {"operator": ("read", "admin"), "finance": ("read",), "tenant": ("read",)}


@pytest.fixture(scope="module")
def _world_of_module(django_db_setup, django_db_blocker):
    """The world, built once per module in a transaction rolled back with it: each test runs
    in a savepoint inside it (its `db`), as tests/reliability's world does."""
    with world_of_module(django_db_blocker):
        tenant_a = Tenant.objects.create(slug="tenant-a", name="Tenant A")
        tenant_b = Tenant.objects.create(slug="tenant-b", name="Tenant B")
        users = users_make(tenant_a)
        admin_api = token_client_make(users["operator"], scopes=["ingest", "read", "admin"])
        invoices = _world_build(admin_api, users, tenant_a, tenant_b)
        yield tenant_a, tenant_b, users, invoices


@pytest.fixture
def tenant_a(_world_of_module, db):
    return _world_of_module[0]


@pytest.fixture
def tenant_b(_world_of_module, db):
    return _world_of_module[1]


@pytest.fixture
def users(_world_of_module, db):
    return _world_of_module[2]


@pytest.fixture
def world(_world_of_module, db, now):
    if now != DEFAULT_NOW:
        pytest.fail(f"the world is built at {DEFAULT_NOW}")
    return copy.deepcopy(_world_of_module[3])


def _world_build(admin_api, users, tenant_a, tenant_b):
    make_priced_model()
    make_march_usage(admin_api, tenant_a, "a1", discount_pct=Decimal(25))
    make_march_usage(admin_api, tenant_b, "b1", discount_pct=Decimal(10))
    make_priced_model(model="qwen-7b", pool="l40s-b")
    post_usage(admin_api, [{"id": "a2", **MARCH_USAGE}], tenant="tenant-a", model="qwen-7b")
    march = datetime(2026, 3, 3, tzinfo=UTC)
    incident_create(
        title="Slow llama", severity="sev2", impact="degraded", started_at=march,
        resolved_at=march.replace(hour=2), deployments=[Deployment.objects.get(
            slug="llama-70b@h100-a")], by=users["operator"], now=march.replace(hour=3),
    )  # fmt: skip
    incident_create(
        title="l40s-b down", severity="sev1", impact="major_outage", started_at=march,
        pools=[Pool.objects.get(slug="l40s-b")], by=users["operator"], now=march,
    )  # fmt: skip
    invoices = {i.tenant.slug: i for i in close_run(month_start=MARCH).issued}
    credit_note_issue(
        invoice=invoices["tenant-a"], reason="goodwill", settle="balance",
        amount=Decimal("1.00"), by=users["finance"],
    )  # fmt: skip
    for tenant in (tenant_b, tenant_a, None):  # each tenant's endpoint, and the factory's
        endpoint_create(url=f"https://hooks.example.com/{tenant.slug if tenant else 'ops'}",
                        tenant=tenant, by=users["operator"])  # fmt: skip
    promotion_grant(
        tenant=tenant_b, amount=Decimal(5), currency="USD",
        effective_from=datetime(2026, 4, 1, tzinfo=UTC), by=users["finance"],
    )  # fmt: skip
    for tenant, alerts in ((tenant_a, ("50", "100")), (tenant_b, ("50",))):
        rule = rule_create(kind="budget", tenant=tenant, params={"amount": "10.00"},
                           by=users["finance"])  # fmt: skip
        for threshold in alerts:  # 50% resolved, 100% firing
            resolved = march if threshold == "50" else None
            Alert.objects.create(
                rule=rule, window_start=MARCH, threshold=threshold, level="warning",
                value=f"{threshold}.0%", summary=f"{tenant.name} reached {threshold}%",
                state=Alert.State.RESOLVED if resolved else Alert.State.FIRING,
                fired_at=march, resolved_at=resolved,
            )  # fmt: skip
    return invoices


def _api_rows(client, path: str, key: str) -> list:
    body = client.get(path).json()
    assert "results" in body, body
    assert body["next"] is None  # one page: the world is small
    return [row[key] for row in body["results"]]


def _csv_rows(client, path: str, column: str) -> list:
    response = client.get(path)
    text = (
        b"".join(response.streaming_content) if response.streaming else response.content
    ).decode()
    return [row[column] for row in csv.DictReader(io.StringIO(text))]


def _with(path: str, query: str) -> str:
    return path if not query else path + ("&" if "?" in path else "?") + query


class Listing(NamedTuple):
    """A list resource: its page, its API and how each names a row, who may open the page
    (the ledger's is staff's: the books), the filters to compare them under."""

    page: str
    api: str
    page_key: Callable
    api_key: str
    roles: tuple[str, ...]
    filters: tuple[str, ...] = ("",)
    rows: Callable = lambda context: context["page"]  # the page's rows, from its context
    export: tuple | None = None  # its CSV, the column naming a row, that name from a page row
    tenants: Callable = lambda row: {row.tenant.slug}  # the tenants a page row belongs to


EVERYONE = ("finance", "operator", "tenant")
STAFF = ("finance", "operator")
LISTS = {
    "invoices": Listing(
        "/billing/invoices/", "/api/v1/invoices", lambda i: i.number, "number", EVERYONE,
        ("", "tenant=tenant-a", "status=issued", "status=paid", "ordering=-total",
         "ordering=tenant", "status=issued&ordering=-number", "ordering=paid_at"),
        export=("/billing/invoices/?format=csv", "number", lambda i: i.number),
    ),
    "credit notes": Listing(
        "/billing/credit-notes/", "/api/v1/credit-notes", lambda n: n.number, "number",
        EVERYONE, ("", "tenant=tenant-a", "reason=goodwill", "reason=dispute",
                   "ordering=-total"),
        export=("/billing/credit-notes/?format=csv", "number", lambda n: n.number),
    ),
    "ledger": Listing(
        "/billing/ledger/?period=2026-03", "/api/v1/ledger?period=2026-03", lambda p: p.pk,
        "id", STAFF, ("", "tenant=tenant-b", "kind=invoice", "account=cash",
                             "ordering=account", "ordering=-tenant", "kind=invoice&ordering=amount"),
        export=("/billing/ledger/?period=2026-03&format=csv", "transaction",
                lambda p: str(p.transaction_id)),
    ),
    "audit log": Listing(
        "/audit/", "/api/v1/audit", lambda e: e.pk, "id", ("operator",),
        ("", "object_type=contract", "action=contract.create", "action=none",
         "ordering=action", "ordering=-actor"),
        export=("/audit/?format=csv", "id", lambda e: str(e.pk)),
    ),
    "incidents": Listing(
        "/incidents/history/", "/api/v1/incidents", lambda i: i["incident"].pk, "id",
        EVERYONE, ("", "status=open", "status=resolved", "impact=major_outage",
                   "tenant=tenant-b", "deployment=llama-70b@h100-a", "month=2026-03",
                   "month=2026-04", "ordering=id", "ordering=-resolved_at"),
        rows=lambda context: context["rows"], tenants=lambda row: set(row["tenants"]),
        export=("/incidents/history/?format=csv", "id", lambda r: str(r["incident"].pk)),
    ),
    "firing alerts": Listing(
        "/alerts/", "/api/v1/alerts?state=firing", lambda a: a.pk, "id", EVERYONE,
        rows=lambda context: context["firing"], tenants=lambda a: {a.rule.tenant.slug},
    ),
    "resolved alerts": Listing(
        "/alerts/", "/api/v1/alerts?state=resolved", lambda a: a.pk, "id", EVERYONE,
        tenants=lambda a: {a.rule.tenant.slug},
    ),
    "alert rules": Listing(
        "/alerts/", "/api/v1/alert-rules", lambda r: r.pk, "id", EVERYONE,
        rows=lambda context: context["rules"],
    ),
    "webhook endpoints": Listing(
        "/notifications/", "/api/v1/webhook-endpoints", lambda e: e.pk, "id", EVERYONE,
        rows=lambda context: context["endpoints"],
    ),
    # The price book: every version of each, in force, scheduled or superseded.
    "prices": Listing(
        "/billing/prices/", "/api/v1/prices", lambda p: p.pk, "id", STAFF,
        rows=lambda context: [state["version"] for state in context["book"].prices],
    ),
    "contracts": Listing(
        "/billing/prices/", "/api/v1/contracts", lambda c: c.pk, "id", STAFF,
        rows=lambda context: [state["version"] for state in context["book"].contracts],
    ),
    "promotions": Listing(
        "/billing/prices/", "/api/v1/promotions", lambda p: p.pk, "id", STAFF,
        rows=lambda context: context["book"].promotions,
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("resource", "role"),
    [(name, role) for name, listing in LISTS.items() for role in listing.roles],
)
def test_the_page_the_api_and_the_csv_of_a_list_give_the_same_rows(
    world, resource, role, users, client, token_client
):
    listing = LISTS[resource]
    client.force_login(users[role])
    api = token_client(users[role], scopes=READS[role])
    seen = 0
    for query in listing.filters:
        if role == "tenant" and "tenant-b" in query:
            continue  # another tenant's rows: a 404 (tests/reliability/test_isolation.py)
        response = client.get(_with(listing.page, query))
        assert response.status_code == 200, (resource, role, query)
        rows = list(listing.rows(response.context))
        assert _api_rows(api, _with(listing.api, query), listing.api_key) == [
            listing.page_key(r) for r in rows
        ], (resource, role, query)
        if listing.export:
            path, column, name = listing.export
            assert _csv_rows(client, _with(path, query), column) == [name(r) for r in rows], (
                resource, role, query,
            )  # fmt: skip
        if role == "tenant":
            assert set().union(*map(listing.tenants, rows)) <= {"tenant-a"}
        seen += len(rows)
    assert seen > 0  # the filters select rows: the comparison is not of empty lists


def test_a_list_sorts_by_a_column_on_its_page_its_csv_and_its_api(
    world, users, client, token_client
):
    """Invoices by total: B's 15.84 (17.60 at 10% off) before A's 26.40 (two models' 17.60
    at 25% off), and after it descending; the header says the order in force and links to
    the other, keeping the filters; an unknown column is refused, naming `ordering`."""
    client.force_login(users["finance"])
    api = token_client(users["finance"], scopes=("read",))
    expected = [("tenant-b", Decimal("15.84")), ("tenant-a", Decimal("26.40"))]
    for ordering, rows in (("total", expected), ("-total", expected[::-1])):
        page = client.get(f"/billing/invoices/?status=issued&ordering={ordering}")
        shown = [(i.tenant.slug, i.total) for i in page.context["page"]]
        listed = [
            (i["tenant"], Decimal(i["total"]))
            for i in api.get(f"/api/v1/invoices?ordering={ordering}").json()["results"]
        ]
        csv_rows = csv.DictReader(io.StringIO(
            client.get(f"/billing/invoices/?format=csv&ordering={ordering}").content.decode()
        ))  # fmt: skip
        exported = [(r["tenant"], Decimal(r["total"])) for r in csv_rows]
        assert shown == listed == exported == rows
    html = client.get("/billing/invoices/?status=issued&ordering=total&page=1").content.decode()
    assert (
        '<th class="num" aria-sort="ascending"><a class="sort" '
        'href="?status=issued&amp;ordering=-total">Total (USD)<span aria-hidden="true">▲</span>'
    ) in html
    assert '<th aria-sort="none"><a class="sort" href="?status=issued&amp;ordering=tenant">' in html
    assert '<input type="hidden" name="ordering" value="total">' in html  # the filters keep it
    refused = api.get("/api/v1/invoices?ordering=secret")
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "ordering"
    assert client.get("/billing/invoices/?ordering=secret").status_code == 400


def test_the_incident_history_downloads_as_the_page_shows_it(world, users, client):
    """Its CSV: each incident the filters select, newest first, with its worst impact and what
    it named (the l40s-b incident names its pool, so the deployment on it)."""
    client.force_login(users["operator"])
    down, slow = (str(Incident.objects.get(title=t).pk) for t in ("l40s-b down", "Slow llama"))
    text = client.get("/incidents/history/?format=csv").content.decode()
    assert list(csv.reader(io.StringIO(text))) == [
        ["id", "title", "severity", "status", "worst_impact", "deployments", "tenants",
         "started_at", "resolved_at"],
        [down, "l40s-b down", "sev1", "investigating", "major_outage", "qwen-7b@l40s-b", "",
         "2026-03-03T00:00:00+00:00", ""],
        [slow, "Slow llama", "sev2", "resolved", "degraded", "llama-70b@h100-a", "",
         "2026-03-03T00:00:00+00:00", "2026-03-03T02:00:00+00:00"],
    ]  # fmt: skip
    resolved = client.get("/incidents/history/?format=csv&status=resolved&ordering=id")
    assert [row["id"] for row in csv.DictReader(io.StringIO(resolved.content.decode()))] == [slow]


USAGE_FILTERS = ["", "tenant=tenant-a", "tenant=tenant-b", "model=qwen-7b", "pool=h100-a",
                 "pool=l40s-b"]  # fmt: skip
USAGE_SUMS = ("requests", "input_tokens", "output_tokens")


@pytest.mark.parametrize("role", ["operator", "finance", "tenant"])
def test_the_usage_page_its_csv_and_the_api_give_the_same_usage(
    world, role, users, client, token_client
):
    """The usage page shows by day and model what the API lists by day, tenant, model and
    pool: for the same filters, the page's rows are the API's summed over tenants and pools,
    and its CSV holds the page's rows."""
    client.force_login(users[role])
    api = token_client(users[role], scopes=READS[role])
    seen = 0
    for query in USAGE_FILTERS:
        if role == "tenant" and "tenant-b" in query:
            continue  # another tenant's rows: a 404 (tests/reliability/test_isolation.py)
        response = client.get(_with("/usage/?period=2026-03", query))
        assert response.status_code == 200, (role, query)
        page = {
            (f"{r['day']:%Y-%m-%d}", r["model"]): tuple(r[k] for k in USAGE_SUMS)
            for r in response.context["page"]
        }
        summed: dict[tuple, tuple] = {}
        body = api.get(_with("/api/v1/usage?period=2026-03", query)).json()
        assert body["next"] is None, body
        for r in body["results"]:
            if role == "tenant":
                assert r["tenant"] == "tenant-a"
            key = (r["period_start"][:10], r["model"])
            before = summed.get(key, (0,) * len(USAGE_SUMS))
            summed[key] = tuple(a + r[k] for a, k in zip(before, USAGE_SUMS, strict=True))
        assert page == summed, (role, query)
        exported = {
            (r["day"], r["model"]): tuple(int(r[k]) for k in USAGE_SUMS)
            for r in csv.DictReader(io.StringIO(
                client.get(_with("/usage/?period=2026-03&format=csv", query)).content.decode()
            ))
        }  # fmt: skip
        assert exported == page, (role, query)
        seen += len(page)
    # A: llama-70b and qwen-7b on 3 March; B: llama-70b (summed with A's on the page).
    assert seen == {"operator": 8, "finance": 8, "tenant": 7}[role]
    # A model or pool the factory does not have is refused, naming the filter.
    assert client.get("/usage/?model=none").status_code == 400
    refused = api.get("/api/v1/usage?pool=none")
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "pool"


def test_the_usage_page_sorts_its_table_and_its_csv_and_its_filters_keep_the_window(
    world, users, client
):
    """3 March: llama-70b served A and B (20 M output tokens), qwen-7b A alone (10 M): by day
    and model the llama row comes first, by output tokens the qwen one; the CSV follows the
    page. The filter form keeps the period and the order it was opened with."""
    client.force_login(users["operator"])
    for ordering, models in (("", ["llama-70b", "qwen-7b"]), ("output_tokens", ["qwen-7b", "llama-70b"]),
                             ("-output_tokens", ["llama-70b", "qwen-7b"]), ("-model", ["qwen-7b", "llama-70b"])):  # fmt: skip
        query = f"/usage/?period=2026-03&ordering={ordering}"
        page = client.get(query)
        assert [row["model"] for row in page.context["page"]] == models, ordering
        exported = csv.DictReader(io.StringIO(client.get(query + "&format=csv").content.decode()))
        assert [row["model"] for row in exported] == models, ordering
    shown = client.get("/usage/?period=2026-03&ordering=-errors").content.decode()
    kept = (
        '<input type="hidden" name="period" value="2026-03">'
        '<input type="hidden" name="ordering" value="-errors">'
    )
    assert kept in shown  # the model and pool filters submit them with their own
    refused = client.get("/usage/?period=2026-03&ordering=secret")
    assert refused.status_code == 400
    assert (
        "ordering: unknown column &#x27;secret&#x27;: one of day, model,"
        in refused.content.decode()
    )
