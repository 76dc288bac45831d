import io
import re
from datetime import timedelta

import pytest

from flywheel.selectors.tfom import tfom_measure
from metering.demo.parameters import demo_window
from portal import clock
from portal.periods import months_before
from tests.conftest import clocks_in_ci
from tests.e2e.conftest import SCREENSHOTS, login, screenshot

pytestmark = pytest.mark.e2e


def _points(page, selector: str) -> int:
    """Non-zero points drawn by every trace of a Plotly chart."""
    return page.evaluate(
        f"() => document.querySelector('{selector}').data"
        ".reduce((n, t) => n + t.y.filter(v => v !== null && v !== 0).length, 0)"
    )


@pytest.mark.parametrize("now", clocks_in_ci("mid-month"), indirect=True)
def test_investor_reads_the_tfom_view_with_trends_and_bands(now, demo, page):
    login(page, "investor", "investor-demo")
    nav = page.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="Investor view").is_visible()
    assert nav.get_by_role("link", name="TFOM reports").is_visible()

    page.goto("/investor/")  # the last 30 days: the whole demo
    page.wait_for_selector("#trend-money-chart .main-svg")
    page.wait_for_selector("#trend-factor-chart .main-svg")
    # The demo: from the first day of the month two months back to today's start,
    # then today up to now. Each of its months: revenue, COGS, opex, EBITDA, EBIT; TEF, TFI.
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    demo_start, _ = demo_window(now)
    months = {(today - timedelta(days=d)).strftime("%Y-%m") for d in range(1, 31)}
    assert _points(page, "#trend-money-chart") >= 5 * len(months)
    assert _points(page, "#trend-factor-chart") >= 2 * len(months)
    tfom = tfom_measure(
        scope="factory", start=today - timedelta(days=29), end=today + timedelta(days=1)
    )
    revenue = f"{tfom.revenue:,.0f}"
    assert page.locator(".tfom-tiles .tile").first.get_by_text(revenue).is_visible()
    assert page.get_by_text("Equivalent GPUs").first.is_visible()
    screenshot(page, "investor-view")

    page.goto("/investor/?period=last_month")
    page.wait_for_selector("#trend-money-chart .main-svg")
    page.wait_for_selector("#trend-factor-chart .main-svg")
    # The trend ends with the period: last month, whole on every day the demo is loaded, and
    # shows the demo's months up to it (the month before it too: two closed months).
    assert demo_start == months_before(now, 2)
    assert _points(page, "#trend-money-chart") == 5 * 2
    assert not page.get_by_text("* A partial month").is_visible()
    table = page.get_by_role("table", name="Profit and loss")
    assert table.get_by_role("row", name="Revenue").first.is_visible()
    assert page.get_by_role("table", name="Industry bands").get_by_text("TEF").first.is_visible()
    assert page.get_by_text("A GPU is the specialised chip").is_visible()
    screenshot(page, "investor-view-last-month")


def test_finance_opens_and_downloads_tfom_reports(demo, page):
    import pypdfium2
    from openpyxl import load_workbook

    login(page, "finance", "finance-demo")
    page.goto("/reports/tfom/")
    month = (clock.now() - timedelta(days=1)).strftime("%Y-%m")
    links = page.get_by_role("table", name="TFOM reports")
    # Two demo months and their quarter(s), each with CSV, XLSX and PDF.
    assert links.get_by_role("link", name=re.compile(r" as PDF$")).count() >= 3
    assert links.get_by_role("link", name=re.compile(r" as XLSX$")).count() >= 3
    screenshot(page, "tfom-reports")

    page.goto(f"/reports/tfom/?period={month}")
    assert page.get_by_role("heading", name="Technical → financial mapping").is_visible()
    assert page.get_by_role("table", name="P&L").is_visible()
    screenshot(page, "tfom-report")

    pdf = page.request.get(f"/reports/tfom/?period={month}&format=pdf")
    assert pdf.headers["content-type"] == "application/pdf"
    document = pypdfium2.PdfDocument(pdf.body())
    assert "TFOM report" in document[0].get_textpage().get_text_range()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    document[0].render(scale=2).to_pil().save(SCREENSHOTS / "tfom-report-pdf.png")
    for index in range(1, len(document)):
        document[index].render(scale=1.5).to_pil().save(
            SCREENSHOTS / f"tfom-report-pdf-{index + 1}.png"
        )

    xlsx = page.request.get(f"/reports/tfom/?period={month}&format=xlsx")
    book = load_workbook(io.BytesIO(xlsx.body()))
    revenue = next(r for r in book["P&L"].iter_rows(min_row=2) if r[0].value == "Revenue")[1]
    assert revenue.data_type == "n" and revenue.value > 0
