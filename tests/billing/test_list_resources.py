"""One read per list resource: the page, the API and the CSV of a list give the same rows for
the same filters, for every role that may read it (each reads through the resource's one
selector and FilterSet; a member sees its own tenant's rows).

The world: tenants A and B each used llama-70b on h100-a in March (17.60 list, A at 25% off,
B at 10% off), A also qwen-7b on l40s-b; the March close issued both invoices and posted
them; A's invoice got a 1.00 credit note to its balance; on 3 March an incident on
llama-70b@h100-a touched A and B (resolved) and one on the pool l40s-b touched A (open);
every write left an audit entry."""

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.services.close import close_run
from billing.services.credit_notes import credit_note_issue
from metering.models import Deployment, Pool
from metering.services.sla.incidents import incident_create
from tests.billing.factories import (
    MARCH,
    MARCH_USAGE,
    make_march_usage,
    make_priced_model,
    post_usage,
)

pytestmark = pytest.mark.both_backends

READS = {"operator": ("read", "admin"), "finance": ("read",), "tenant": ("read",)}


@pytest.fixture
def world(admin_api, users, tenant_a, tenant_b):
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
    return invoices


def _api_rows(client, path: str, key: str) -> list:
    body = client.get(path).json()
    assert "results" in body, body
    assert body["next"] is None  # one page: the world is small
    return [row[key] for row in body["results"]]


def _page_rows(client, path: str, key) -> list:
    response = client.get(path)
    assert response.status_code == 200, path
    return [key(row) for row in response.context["page"].object_list]


def _csv_rows(client, path: str, column: str) -> list:
    response = client.get(path)
    text = (
        b"".join(response.streaming_content) if response.streaming else response.content
    ).decode()
    return [row[column] for row in csv.DictReader(io.StringIO(text))]


# Per list: its page, its API and how both name a row; its CSV, the column it names a row
# by, and that name from the page's row.
LISTS = {
    "invoices": ("/billing/invoices/", "/api/v1/invoices", lambda i: i.number, "number",
                 ("/billing/invoices/?format=csv", "number", lambda i: i.number)),
    "credit notes": ("/billing/credit-notes/", "/api/v1/credit-notes", lambda n: n.number,
                     "number", None),
    "ledger": ("/billing/ledger/?period=2026-03", "/api/v1/ledger?period=2026-03",
               lambda p: p.pk, "id",
               ("/billing/ledger/?period=2026-03&format=csv", "transaction",
                lambda p: str(p.transaction_id))),
    "audit log": ("/audit/", "/api/v1/audit", lambda e: e.pk, "id", None),
    "incidents": ("/incidents/history/", "/api/v1/incidents", lambda i: i["incident"].pk, "id",
                  None),
}  # fmt: skip
FILTERS = {
    "invoices": ["", "tenant=tenant-a", "status=issued", "status=paid"],
    "credit notes": ["", "tenant=tenant-a", "reason=goodwill", "reason=dispute"],
    "ledger": ["", "tenant=tenant-b", "kind=invoice", "account=cash"],
    "audit log": ["", "object_type=contract", "action=contract.create", "action=none"],
    "incidents": ["", "status=open", "status=resolved", "impact=major_outage",
                  "tenant=tenant-b", "deployment=llama-70b@h100-a"],
}  # fmt: skip


def _with(path: str, query: str) -> str:
    return path if not query else path + ("&" if "?" in path else "?") + query


# Who may open each list's page (the ledger's is finance's: the books).
ROLES = {"invoices": ("finance", "operator", "tenant"), "credit notes": ("finance", "operator",
         "tenant"), "ledger": ("finance",), "audit log": ("operator",),
         "incidents": ("finance", "operator", "tenant")}  # fmt: skip
# How a row of each list's page names its tenants (the tenant role sees only its own).
TENANTS = {"incidents": lambda row: set(row["tenants"])}


@pytest.mark.parametrize(
    ("resource", "role"), [(resource, role) for resource in LISTS for role in ROLES[resource]]
)
def test_the_page_the_api_and_the_csv_of_a_list_give_the_same_rows(
    world, resource, role, users, client, token_client
):
    page_path, api_path, page_key, api_key, export = LISTS[resource]
    client.force_login(users[role])
    api = token_client(users[role], scopes=READS[role])
    seen = 0
    for query in FILTERS[resource]:
        if role == "tenant" and "tenant-b" in query:
            continue  # another tenant's rows: a 404 (tests/reliability/test_isolation.py)
        response = client.get(_with(page_path, query))
        assert response.status_code == 200, (resource, role, query)
        rows = list(response.context["rows" if resource == "incidents" else "page"])
        assert _api_rows(api, _with(api_path, query), api_key) == [page_key(r) for r in rows], (
            resource, role, query,
        )  # fmt: skip
        if export:
            path, column, name = export
            assert sorted(_csv_rows(client, _with(path, query), column)) == sorted(
                name(r) for r in rows
            ), (resource, role, query)
        if role == "tenant":
            tenants = TENANTS.get(resource, lambda r: {r.tenant.slug})
            assert set().union(*map(tenants, rows)) <= {"tenant-a"}
        seen += len(rows)
    assert seen > 0  # the filters select rows: the comparison is not of empty lists


USAGE_FILTERS = ["", "tenant=tenant-a", "tenant=tenant-b", "model=qwen-7b", "pool=h100-a",
                 "model=none"]  # fmt: skip
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
    assert seen == {"operator": 7, "finance": 7, "tenant": 6}[role]
