"""GET /api/v1/chargeback (kpis.md 3e) on the April example of test_tfom_api: acme's five
events of 1,866,240,000 output tokens (1,866,240 std GPU-seconds each, R_ref 1,000, w_in 0)
and 1,000,000 input tokens, three of project alpha, one of beta, one without a project.

Cost basis: April's total_cost 20,185.20 over 9,331,200 std GPU-seconds: alpha 3/5 =
12,111.12, beta and (none) 1/5 = 4,037.04 each; 20,185.20 in all.
Invoice basis (the month as rated so far: no invoice yet): output 9,331.2 M at 2.00 less
20 % = 14,929.92, split 3:1:1 by realized amounts: 8,957.952, 2,985.984, 2,985.984 cents
→ 895,795 + 298,598 + 298,598 and the one cent left to the first of the two .4 remainders,
(none): 8,957.95, 2,985.98, 2,985.99; input 5 M at 0.50 less 20 % = 2.00: 1.20, 0.40, 0.40.
alpha 8,959.15 + beta 2,986.38 + (none) 2,986.39 = 14,931.92, the month's total."""

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from openpyxl import load_workbook
from rest_framework.test import APIClient

from tests.flywheel.test_tfom_api import (
    INPUT_PER_EVENT,
    OUTPUT_PER_EVENT,
    build_factory,
    post_april_usage,
)

pytestmark = pytest.mark.both_backends

PROJECTS = ["alpha", "alpha", "beta", None, "alpha"]


@pytest.fixture
def april(users, token_client):
    admin = token_client(users["operator"], scopes=["admin", "read"])
    ingest = token_client(users["operator"], scopes=["ingest"])
    build_factory(admin, ingest)
    post_april_usage(ingest, projects=PROJECTS)
    return token_client(users["finance"], scopes=["read"])


def _get(client, query, status=200):
    response = client.get(f"/api/v1/chargeback?month=2026-04&{query}")
    assert response.status_code == status, response.content[:500]
    return response


def test_the_cost_basis_sums_to_total_cost(april):
    body = _get(april, "basis=cost").json()
    assert (body["total_cost"], Decimal(body["std_gpu_seconds"])) == ("20185.20", 9_331_200)
    assert [(r["tenant"], r["project"], r["cost"]) for r in body["rows"]] == [
        ("acme", "(none)", "4037.04"),
        ("acme", "alpha", "12111.12"),
        ("acme", "beta", "4037.04"),
    ]


@pytest.mark.parametrize("now", [datetime(2026, 4, 20, 12, tzinfo=UTC)], indirect=True)
def test_an_open_month_is_charged_its_cost_so_far(april):
    """kpis.md section 0: an open month is measured to the cut, nothing ahead of it. On 20
    April at 12:00 (19.5 of its 30 days, 0.65 of it), every cost of the example is 0.65 of
    the month's: 745.20, 7,200, 1,440 and 10,800 -> 484.38 + 4,680 + 936 + 7,020 =
    13,120.38, the total_cost of April's TFOM read now; alpha 3/5 = 7,872.228 -> 7,872.23,
    beta and (none) 2,624.076 each -> 2,624.08 and 2,624.07 (largest remainder)."""
    body = _get(april, "basis=cost").json()
    assert body["total_cost"] == "13120.38"
    assert april.get("/api/v1/tfom?period=2026-04").json()["total_cost"] == "13120.38"
    costs = {r["project"]: Decimal(r["cost"]) for r in body["rows"]}
    assert costs["alpha"] == Decimal("7872.23")
    assert sorted(costs.values()) == [Decimal("2624.07"), Decimal("2624.08"), costs["alpha"]]
    assert sum(costs.values()) == Decimal("13120.38")


def test_the_invoice_basis_splits_each_line_to_the_cent(april):
    body = _get(april, "basis=invoice&tenant=acme").json()
    assert body["tenants"] == [
        {"tenant": "acme", "status": "rated so far", "currency": "USD", "total": "14931.92"}
    ]
    rows = {row["project"]: row for row in body["rows"]}
    assert {p: (r["usage"], r["total"]) for p, r in rows.items()} == {
        "(none)": ("2986.39", "2986.39"),
        "alpha": ("8959.15", "8959.15"),
        "beta": ("2986.38", "2986.38"),
    }
    assert (rows["alpha"]["output_tokens"], rows["alpha"]["input_tokens"]) == (
        3 * OUTPUT_PER_EVENT,
        3 * INPUT_PER_EVENT,
    )
    assert rows["alpha"]["list_value"] == "11198.94"  # 5,598.72 M x 2.00 + 3 M x 0.50


def test_csv_and_xlsx_carry_the_same_rows(april):
    text = _get(april, "format=csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["project"], r["total"]) for r in rows] == [
        ("(none)", "2986.39"),
        ("alpha", "8959.15"),
        ("beta", "2986.38"),
    ]
    book = load_workbook(io.BytesIO(_get(april, "format=xlsx&basis=cost").content))
    sheet = book.active
    assert sheet["A1"].value == "Chargeback April 2026, cost basis"
    costs = [(row[2], row[7]) for row in sheet.iter_rows(min_row=3, values_only=True)]
    assert costs == [("(none)", 4037.04), ("alpha", 12111.12), ("beta", 4037.04)]


def test_who_reads_which_chargeback(april, users, token_client):
    member = token_client(users["tenant"], scopes=["read"])  # tenant-a's: acme is not its own
    for basis in ("invoice", "cost"):
        assert _get(member, f"basis={basis}").json()["rows"] == []
    assert _get(member, "tenant=acme", status=404)
    investor = APIClient()
    investor.force_login(users["investor"])
    assert _get(investor, "basis=cost", status=403)
    for query, field in (("basis=nope", "basis"), ("format=pdf", "format")):
        assert _get(april, query, status=400).json()["errors"][0]["field"] == field


def test_the_cost_basis_weighs_each_hour_by_the_version_in_force(april):
    """R_ref 2,000 from 12 April: the events of the 12th, 13th and 14th (beta, (none), alpha)
    weigh 933,120 std GPU-seconds each, those of the 10th and 11th (alpha) 1,866,240: alpha
    4,665,600 of 6,531,840 = 5/7 of 20,185.20 = 14,418.00, beta and (none) 2,883.60 each."""
    from metering.models import Deployment
    from metering.services.factory import VersionSpec, deployment_version_add

    deployment_version_add(
        deployment=Deployment.objects.get(slug="llama@h100-a"),
        effective_from=datetime(2026, 4, 12, tzinfo=UTC),
        spec=VersionSpec(r_ref=Decimal(2000), w_in=Decimal(0)),
        by=None,
    )
    body = _get(april, "basis=cost").json()
    assert (body["total_cost"], Decimal(body["std_gpu_seconds"])) == ("20185.20", 6_531_840)
    assert [(r["project"], Decimal(r["std_gpu_seconds"]), r["cost"]) for r in body["rows"]] == [
        ("(none)", 933_120, "2883.60"),
        ("alpha", 4_665_600, "14418.00"),
        ("beta", 933_120, "2883.60"),
    ]
