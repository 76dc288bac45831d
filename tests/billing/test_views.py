"""Billing pages: exports escape formulas, actions post to the ledger, realization is exact."""

import csv
import io
from decimal import Decimal

import pytest

from billing.models import Invoice, LedgerTransaction
from billing.services.close import close_run
from tests.billing.factories import MARCH, make_march_usage, make_priced_model, make_promotion

pytestmark = pytest.mark.both_backends


@pytest.fixture
def march_invoice(admin_api, tenant_a):
    """Tenant A's issued March invoice: 17.60 of usage at 25% off, less a promotional credit
    whose description is a spreadsheet formula."""
    make_priced_model()
    make_march_usage(admin_api, tenant_a, "v1", discount_pct=Decimal(25))
    make_promotion(tenant_a, "1.00", description='=HYPERLINK("http://evil")')
    [invoice] = close_run(month_start=MARCH).issued
    return invoice


def _csv(response):
    return list(
        csv.reader(
            io.StringIO(
                b"".join(response.streaming_content).decode()
                if response.streaming
                else response.content.decode()
            )
        )
    )


def test_invoice_csv_escapes_formula_text_and_writes_numbers_as_numbers(
    client, users, march_invoice
):
    client.force_login(users["finance"])
    rows = _csv(client.get(f"/billing/invoices/{march_invoice.pk}/csv/"))
    promotion = next(row for row in rows if row[1] == "promotion")
    assert promotion[2] == '\'=HYPERLINK("http://evil")'
    assert promotion[10] == "-1.0000"  # a number, negatives included: read as a number
    assert Decimal(promotion[10]) == Decimal(-1)
    usage = [row for row in rows if row[1] == "usage"]
    # 10 M input and 10 M output at 0.88, 25% off: 6.60 each.
    assert [(row[4], row[5], row[6], row[10]) for row in usage] == [
        ("input", "input", "10000000", "6.6000"),
        ("output", "output", "10000000", "6.6000"),
    ]


def test_invoice_page_records_payment_and_void(client, users, march_invoice):
    client.force_login(users["finance"])
    page = client.get(f"/billing/invoices/{march_invoice.pk}/")
    assert "12.20 USD" in page.content.decode()  # 13.20 less the 1.00 credit
    response = client.post(f"/billing/invoices/{march_invoice.pk}/pay/")
    assert response.status_code == 302
    assert Invoice.objects.get().status == "paid"
    refused = client.post(f"/billing/invoices/{march_invoice.pk}/void/", {"reason": "late"})
    assert refused.status_code == 302
    assert Invoice.objects.get().status == "paid"  # a paid invoice is not voided
    assert LedgerTransaction.objects.filter(kind="reversal").count() == 0


def test_void_is_not_offered_on_an_invoice_of_a_closed_month_its_reason_is(
    client, users, march_invoice
):
    """No dead end: March is closed, so its invoice's page offers no Void (the service
    would refuse it) and says why; a credit note's reason is chosen, never defaulted."""
    client.force_login(users["finance"])
    page = client.get(f"/billing/invoices/{march_invoice.pk}/").content.decode()
    assert f"/billing/invoices/{march_invoice.pk}/void/" not in page
    assert ">Void<" not in page
    assert (
        f"Not voidable: 2026-03 is closed: {march_invoice.number} is not voided; correct it "
        "with a credit note." in page
    )
    assert "Record payment" in page  # what may still be done is offered
    assert '<option value="" selected>Choose a reason</option>' in page
    refused = client.post(f"/billing/invoices/{march_invoice.pk}/credit/", {"amount": "1.00"})
    assert refused.status_code == 400
    assert "reason: must be one of" in refused.content.decode()


def test_tenant_cannot_act_on_or_open_another_tenants_invoice(
    client, make_user, tenant_b, march_invoice
):
    other = make_user("tenant", tenant=tenant_b)
    client.force_login(other)
    assert client.get(f"/billing/invoices/{march_invoice.pk}/").status_code == 404
    assert client.get(f"/billing/invoices/{march_invoice.pk}/pdf/").status_code == 404
    assert client.post(f"/billing/invoices/{march_invoice.pk}/pay/").status_code == 403


def test_realization_page_shows_exact_ratio(client, users, march_invoice):
    client.force_login(users["finance"])
    page = client.get("/billing/realization/?from=2026-03-01&to=2026-04-01")
    body = page.content.decode()
    # List 17.60; realized 13.20 less the 1.00 promotion = 12.20: ρ = 69.3%.
    assert page.context["result"].list_value == Decimal("17.60")
    assert page.context["result"].realized == Decimal("12.20")
    assert "69.3%" in body


def test_every_export_leaves_an_audit_entry(client, users, march_invoice, now):
    from portal.models import AuditEntry

    client.force_login(users["finance"])
    client.get(f"/billing/invoices/{march_invoice.pk}/csv/")
    client.get("/billing/invoices/?format=csv")
    client.get(f"/billing/invoices/{march_invoice.pk}/")  # a page, not an export
    # The API's schema: a download, but of no data (every load of the API docs fetches it).
    assert "filename=" in client.get("/api/schema/")["Content-Disposition"]

    exports = AuditEntry.objects.filter(action="export").order_by("id")
    assert [(e.actor, e.object_type, e.object_id) for e in exports] == [
        (users["finance"], "invoice-page-csv", f"{march_invoice.number}.csv"),
        (users["finance"], "invoices", f"invoices-as-of-{now:%Y-%m-%d}.csv"),
    ]


def test_an_invoice_of_twenty_lines_prints_on_one_page(client, users, march_invoice):
    """ui.md: up to 20 lines on one page. The printed lines name the model and the token
    class in words; the price and the combined discount have their own columns."""
    from billing.models import InvoiceLine

    existing = list(march_invoice.lines.all())
    classes = ["input", "cached_input", "cache_write", "output", "reasoning"]
    for n in range(20 - len(existing)):
        InvoiceLine.objects.create(
            invoice=march_invoice, position=100 + n, kind="usage", model="qwen3-235b-a22b",
            token_class=classes[n % 5], price_class=classes[n % 5], quantity=123_456_789_012,
            list_unit_price=Decimal("0.175"), list_amount=Decimal("21604.94"),
            discount_pct=Decimal(46), discount=Decimal("9938.27"), amount=Decimal("11666.67"),
            description="qwen3-235b-a22b cached input tokens at 0.175 per million, contract "
            "discount 40%, volume tier ≥ 2.0 T tokens: −10% (46% off in all)",
            for_month=march_invoice.period_start,
        )  # fmt: skip
    client.force_login(users["finance"])

    pdf = client.get(f"/billing/invoices/{march_invoice.pk}/pdf/").content
    line = InvoiceLine.objects.filter(invoice=march_invoice, position=101).get()

    assert march_invoice.lines.count() == 20
    assert _pdf_pages(pdf) == 1
    assert line.short_description == "qwen3-235b-a22b · cached input tokens"


def _pdf_pages(pdf: bytes) -> int:
    """The page count of a PDF: the /Count of its page tree, which WeasyPrint writes in
    a compressed object stream."""
    import re
    import zlib

    for stream in re.findall(rb"stream\r?\n(.*?)\r?\nendstream", pdf, re.S):
        try:
            text = zlib.decompress(stream)
        except zlib.error:
            continue
        if found := re.search(rb"/Type /Pages.*?/Count (\d+)", text, re.S):
            return int(found[1])
    found = re.search(rb"/Type /Pages.*?/Count (\d+)", pdf, re.S)
    return int(found[1]) if found else 0
