"""The FOCUS 1.2 export: every mandatory column with its type and allowed values (as read in
the FOCUS specification, tag v1.2, commit 7296e3146fb931ee32b6496fa6e4200e7f4384f7), BilledCost
tied to the invoices less credit notes, purchases and their draws never counted twice, and a
Parquet file that reads back to the same rows."""

import csv
import io
import re
from datetime import UTC, datetime
from decimal import Decimal

import pyarrow.parquet as pq
import pytest

from billing.models import CreditNote, Invoice
from billing.services.close import close_run
from billing.services.credit_notes import credit_note_issue
from tests.billing.conftest import NOV, OCT, B
from tests.billing.factories import make_contract, make_priced_model, post_usage

pytestmark = pytest.mark.both_backends

# specification/columns/*.md at v1.2: Feature level "Mandatory", with type and nullability.
MANDATORY = {
    "BilledCost": ("Decimal", False), "BillingAccountId": ("String", False),
    "BillingAccountName": ("String", True), "BillingCurrency": ("String", False),
    "BillingPeriodEnd": ("Date/Time", False), "BillingPeriodStart": ("Date/Time", False),
    "ChargeCategory": ("String", False), "ChargeClass": ("String", True),
    "ChargeDescription": ("String", True), "ChargePeriodEnd": ("Date/Time", False),
    "ChargePeriodStart": ("Date/Time", False), "ContractedCost": ("Decimal", False),
    "EffectiveCost": ("Decimal", False), "InvoiceIssuerName": ("String", False),
    "ListCost": ("Decimal", False), "PricingQuantity": ("Decimal", True),
    "PricingUnit": ("String", True), "ProviderName": ("String", False),
    "PublisherName": ("String", False), "ServiceCategory": ("String", False),
    "ServiceName": ("String", False),
}  # fmt: skip
ALLOWED = {
    "ChargeCategory": {"Usage", "Purchase", "Tax", "Credit", "Adjustment"},
    "ChargeClass": {"Correction"},
    "ChargeFrequency": {"One-Time", "Recurring", "Usage-Based"},
    "ServiceCategory": {"AI and Machine Learning"},  # the category of LLM inference
}
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
DECIMAL_TEXT = re.compile(r"^-?\d+\.\d+$")  # always a fractional part: typed as decimal


def _csv(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_focus_export_has_every_mandatory_column_and_ties_to_the_invoices(finance, october):
    b = october["tenant-b"]
    credit_note_issue(invoice=b, reason="dispute", settle="balance", amount="150.00",
                      now=datetime(2026, 11, 3, tzinfo=UTC))  # fmt: skip

    october_rows = _csv(finance.get("/api/v1/exports/focus?month=2026-10"))
    november_rows = _csv(finance.get("/api/v1/exports/focus?month=2026-11"))

    for rows in (october_rows, november_rows):
        assert rows and set(MANDATORY) <= set(rows[0])
        for row in rows:
            for name, (kind, nullable) in MANDATORY.items():
                value = row[name]
                if value == "":
                    assert nullable, (name, row)
                    continue
                if kind == "Decimal":  # a valid decimal, with its fractional part
                    assert DECIMAL_TEXT.match(value), (name, value)
                elif kind == "Date/Time":
                    assert TIME.match(value), (name, value)
            for name, allowed in ALLOWED.items():
                assert row[name] == "" or row[name] in allowed, (name, row[name])
            assert row["BillingCurrency"] == "USD"
    # October: the purchase (5,000.00) and both usage invoices (tenant-a 1,000.00 after its
    # prepaid draw, tenant-b 1,800.00).
    billed = _sums(october_rows, "BilledCost")
    assert billed == {"tenant-a": Decimal("6000.00"), "tenant-b": Decimal("1800.00")}
    assert billed["tenant-a"] == sum(
        Invoice.objects.filter(tenant__slug="tenant-a").values_list("total", flat=True)
    )
    # The purchase and its draw are never counted twice: EffectiveCost is the usage.
    assert _sums(october_rows, "EffectiveCost") == {
        "tenant-a": Decimal("6000.00"),
        "tenant-b": Decimal("1800.00"),
    }
    categories = sorted(
        (r["BillingAccountId"], r["ChargeCategory"], r["BilledCost"]) for r in october_rows
    )
    assert categories == [
        ("tenant-a", "Credit", "-5000.0"),
        ("tenant-a", "Purchase", "5000.0"),
        ("tenant-a", "Usage", "3000.0"),
        ("tenant-a", "Usage", "3000.0"),
        ("tenant-b", "Usage", "900.0"),
        ("tenant-b", "Usage", "900.0"),
    ]
    usage = next(r for r in october_rows if r["BillingAccountId"] == "tenant-b")
    assert (usage["SkuId"], usage["PricingUnit"], usage["PricingQuantity"], usage["ListUnitPrice"],
            usage["ListCost"], usage["ContractedUnitPrice"], usage["ContractedCost"]) == (
        "llama-70b/input", "1000000 Tokens", "1000.0", "1.0", "1000.0", "0.9", "900.0",
    )  # fmt: skip
    # November holds the credit note issued in it, a correction of October.
    [note] = november_rows
    assert (note["ChargeCategory"], note["ChargeClass"], note["BilledCost"], note["InvoiceId"]) == (
        "Credit", "Correction", "-150.0", CreditNote.objects.get().number,
    )  # fmt: skip


def _sums(rows: list[dict], column: str) -> dict[str, Decimal]:
    sums: dict[str, Decimal] = {}
    for row in rows:
        sums[row["BillingAccountId"]] = sums.get(row["BillingAccountId"], Decimal(0)) + Decimal(
            row[column]
        )
    return sums


def test_the_parquet_file_reads_back_to_the_same_rows(finance, october):
    rows = _csv(finance.get("/api/v1/exports/focus?month=2026-10"))
    response = finance.get("/api/v1/exports/focus?month=2026-10&format=parquet")
    assert response["Content-Type"] == "application/vnd.apache.parquet"

    table = pq.read_table(io.BytesIO(response.content))

    assert table.num_rows == len(rows)
    assert set(MANDATORY) <= set(table.column_names)
    assert str(table.schema.field("BilledCost").type) == "decimal128(38, 12)"
    assert str(table.schema.field("ChargePeriodStart").type) == "timestamp[ms, tz=UTC]"
    back = table.to_pylist()
    for parquet_row, csv_row in zip(back, rows, strict=True):
        assert parquet_row["BilledCost"] == Decimal(csv_row["BilledCost"])
        assert parquet_row["ChargeCategory"] == csv_row["ChargeCategory"]
        assert (
            parquet_row["ChargePeriodStart"].strftime("%Y-%m-%dT%H:%M:%SZ")
            == csv_row["ChargePeriodStart"]
        )
        assert (parquet_row["ChargeClass"] or "") == csv_row["ChargeClass"]


def test_a_tenant_downloads_only_its_own_rows(users, october, client):
    client.force_login(users["tenant"])
    own = _csv(client.get("/api/v1/exports/focus?month=2026-10"))
    assert {row["BillingAccountId"] for row in own} == {"tenant-a"}
    assert client.get("/api/v1/exports/focus?month=2026-10&tenant=tenant-b").status_code == 404
    bad = client.get("/api/v1/exports/focus?month=2026-10&format=xlsx")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "format"


def test_rows_carry_the_project_they_are_charged_to(finance, admin_api, tenant_a):
    """tenant-a's October: project search 1 B input and 1 B output tokens, project eval
    1 B input, at 1.00 per million: the input line (2,000.00) is split 1,000.00 / 1,000.00
    with each project's tokens, the output line (1,000.00) is search's alone."""
    make_priced_model(prices=("1", "0.5", "1"))
    make_contract(tenant_a)
    post_usage(admin_api, [
        {"id": "s", "time": "2026-10-02T10:00:00Z", "input_tokens": B, "output_tokens": B,
         "project": "search"},
        {"id": "e", "time": "2026-10-02T11:00:00Z", "input_tokens": B, "output_tokens": 0,
         "project": "eval"},
    ])  # fmt: skip
    close_run(month_start=OCT, now=NOV.replace(hour=2))

    rows = _csv(finance.get("/api/v1/exports/focus?month=2026-10"))

    assert sorted(
        (r["SubAccountId"], r["SubAccountName"], r["SkuId"], r["ConsumedQuantity"],
         r["ListCost"], r["BilledCost"]) for r in rows
    ) == [
        ("tenant-a/eval", "eval", "llama-70b/input", f"{B}.0", "1000.0", "1000.0"),
        ("tenant-a/search", "search", "llama-70b/input", f"{B}.0", "1000.0", "1000.0"),
        ("tenant-a/search", "search", "llama-70b/output", f"{B}.0", "1000.0", "1000.0"),
    ]  # fmt: skip
    assert _sums(rows, "BilledCost") == {"tenant-a": Invoice.objects.get().total}
