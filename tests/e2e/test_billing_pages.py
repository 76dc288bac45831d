import re
from datetime import timedelta
from decimal import Decimal

import pytest

from billing.models import Invoice
from tests.e2e.conftest import SCREENSHOTS, chart_points, login, screenshot

pytestmark = pytest.mark.e2e


def test_finance_reads_ledger_invoices_and_realization(demo, page):
    login(page, "finance", "finance-demo")

    page.goto("/billing/invoices/")
    invoices = Invoice.objects.filter(kind="usage").order_by("number")
    first = invoices.first()
    assert page.get_by_role("link", name=first.number).is_visible()
    screenshot(page, "billing-invoices")

    page.get_by_role("link", name=first.number).click()
    page.wait_for_load_state("networkidle")
    total = f"{first.total.quantize(Decimal('0.01')):,.2f} USD"
    assert page.get_by_role("row", name=f"Total due {total}").is_visible()
    # Token classes: DeepSeek-R1's reasoning at its own price, Qwen3's at output's, the
    # tenant's cache writes at input's (kpis.md section 3; the demo's price book).
    for text in (
        "deepseek-r1 reasoning tokens at 2.19 per million",
        "qwen3-235b-a22b reasoning tokens at 1.4 per million (priced as output)",
        "cache write tokens at 0.88 per million (priced as input)",
    ):
        assert page.get_by_text(text).first.is_visible(), text
    assert page.get_by_text("deepseek-r1 reasoning tokens at 2.19 per million (priced").count() == 0
    screenshot(page, "billing-invoice")

    pdf = page.request.get(f"/billing/invoices/{first.pk}/pdf/")
    assert pdf.headers["content-type"] == "application/pdf"
    import pypdfium2

    document = pypdfium2.PdfDocument(pdf.body())
    pages = [document[i].get_textpage().get_text_range() for i in range(len(document))]
    assert first.number in pages[0]
    # The total closes the lines once, on the page they end on (never repeated per page).
    assert [total.replace(" USD", "") in text for text in pages].count(True) == 1
    text = "".join(pages)  # lines named in words: the model and its token class
    assert re.search(r"\(priced\s+as\s+output\)", text) and "cached_input" not in text
    assert re.search(r"cached\s+input\s+tokens", text)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    document[0].render(scale=2).to_pil().save(SCREENSHOTS / "billing-invoice-pdf.png")

    page.goto("/billing/ledger/")
    balances = page.get_by_role("table", name="Balances")
    assert balances.get_by_role("cell", name="cash", exact=True).is_visible()
    screenshot(page, "billing-ledger")

    page.goto("/billing/realization/")
    page.wait_for_selector("#realization-chart .main-svg")
    assert chart_points(page, "#realization-chart") >= 2 * 10  # list and realized, ten tenants
    assert chart_points(page, "#unsold-chart") >= 6  # trial and internal tenants
    screenshot(page, "billing-realization")

    page.goto("/billing/prices/")
    assert page.get_by_role("cell", name="deepseek-r1").first.is_visible()
    screenshot(page, "billing-prices")


def test_tenant_sees_only_its_invoices_and_can_download_them(demo, page):
    login(page, "acme", "acme-demo")
    page.goto("/")
    page.wait_for_selector("#usage-chart .main-svg")
    assert page.get_by_role("heading", name="Acme Robotics").is_visible()
    assert page.get_by_role("table", name="Recent invoices").get_by_role("row").count() >= 2
    screenshot(page, "tenant-home")
    page.goto("/billing/invoices/")
    rows = page.get_by_role("table", name="Invoices").get_by_role("row")
    own = Invoice.objects.filter(tenant__slug="acme").count()
    assert own >= 1
    assert rows.count() == 1 + own
    other = Invoice.objects.exclude(tenant__slug="acme").first()
    assert page.request.get(f"/billing/invoices/{other.pk}/").status == 404
    assert page.request.get(f"/billing/invoices/{other.pk}/pdf/").status == 404
    assert page.request.get("/billing/ledger/").status == 403

    page.goto("/billing/sla/")
    page.wait_for_selector("#sla-chart .main-svg")
    history = page.get_by_role("table", name="SLA attainment")
    # The demo's three months in service (two closed and this one), newest first; none
    # before the factory was (kpis.md section 0). The chart ticks them by month.
    assert history.get_by_role("row").count() == 1 + 3
    ticks = page.evaluate(
        "() => [...document.querySelectorAll('#sla-chart .xtick text')].map(t => t.textContent)"
    )
    # The month in progress is named with how much of it there is (ui.md, partial periods).
    month = r"[A-Z][a-z]{2} \d{4}"
    assert len(ticks) == 3 and all(re.fullmatch(month, t) for t in ticks[:2]), ticks
    assert re.fullmatch(rf"{month} \(\d+ [dh]\)", ticks[2]), ticks
    screenshot(page, "sla-tenant-demo")


def test_every_closed_month_of_the_demo_ties_out_to_the_ledger(demo):
    """kpis.md, Tie-out and Accounting dates: TFOM's revenue of each invoiced (closed) month
    equals the ledger's to the cent, and the ledger of that month holds its invoices."""
    from billing.selectors.ledger import ledger_revenue
    from flywheel.selectors.tfom import tfom_measure
    from portal.models import ClosedMonth
    from portal.periods import next_month

    months = sorted(ClosedMonth.objects.values_list("month", flat=True))
    assert months, "the demo invoices its last closed month"
    for month in months:
        end = next_month(month)
        tfom = tfom_measure(scope="factory", start=month, end=end)
        ledger = ledger_revenue(start=month.date(), end=end.date())
        invoiced = Invoice.objects.filter(period_start=month, kind="usage")
        dates = {i.issue_transaction.accounting_date for i in invoiced}
        assert tfom.revenue == ledger, month
        assert dates == {end.date() - timedelta(days=1)}, month
