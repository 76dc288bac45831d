"""One read per list resource: the page, the API and the CSV of a list give the same rows for
the same filters, for every role that may read it (each reads through the resource's one
selector and FilterSet; a member sees its own tenant's rows).

The world: tenants A and B each used March (17.60 list, A at 25% off, B at 10% off); the
March close issued both invoices and posted them; A's invoice got a 1.00 credit note to
its balance; every write left an audit entry."""

import csv
import io
from decimal import Decimal

import pytest

from billing.services.close import close_run
from billing.services.credit_notes import credit_note_issue
from tests.billing.factories import MARCH, make_march_usage, make_priced_model

pytestmark = pytest.mark.both_backends

READS = {"operator": ("read", "admin"), "finance": ("read",), "tenant": ("read",)}


@pytest.fixture
def world(admin_api, users, tenant_a, tenant_b):
    make_priced_model()
    make_march_usage(admin_api, tenant_a, "a1", discount_pct=Decimal(25))
    make_march_usage(admin_api, tenant_b, "b1", discount_pct=Decimal(10))
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
}  # fmt: skip
FILTERS = {
    "invoices": ["", "tenant=tenant-a", "status=issued", "status=paid"],
    "credit notes": ["", "tenant=tenant-a", "reason=goodwill", "reason=dispute"],
    "ledger": ["", "tenant=tenant-b", "kind=invoice", "account=cash"],
    "audit log": ["", "object_type=contract", "action=contract.create", "action=none"],
}


def _with(path: str, query: str) -> str:
    return path if not query else path + ("&" if "?" in path else "?") + query


# Who may open each list's page (the ledger's is finance's: the books).
ROLES = {"invoices": ("finance", "operator", "tenant"), "credit notes": ("finance", "operator",
         "tenant"), "ledger": ("finance",), "audit log": ("operator",)}  # fmt: skip


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
        rows = list(response.context["page"].object_list)
        assert _api_rows(api, _with(api_path, query), api_key) == [page_key(r) for r in rows], (
            resource, role, query,
        )  # fmt: skip
        if export:
            path, column, name = export
            assert sorted(_csv_rows(client, _with(path, query), column)) == sorted(
                name(r) for r in rows
            ), (resource, role, query)
        if role == "tenant":
            assert {r.tenant.slug for r in rows} <= {"tenant-a"}
        seen += len(rows)
    assert seen > 0  # the filters select rows: the comparison is not of empty lists
