"""TFOM reports: periods, the HTML list and report, and exact CSV, XLSX and PDF exports."""

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.test import Client

from flywheel.selectors.report_periods import report_period_parse
from portal.errors import FieldError
from tests.flywheel.test_tfom_api import build_factory, post_april_usage

NOW = datetime(2026, 11, 30, 3, 55, tzinfo=UTC)


@pytest.fixture
def finance(users, token_client, client):
    """The April example of test_tfom_api, read by finance through the pages."""
    admin = token_client(users["operator"], scopes=["admin", "read"])
    ingest = token_client(users["operator"], scopes=["ingest"])
    build_factory(admin, ingest)
    post_april_usage(ingest)
    client.force_login(users["finance"])
    return client


def test_report_period_parse_months_and_quarters(db):
    april = report_period_parse({"period": "2026-04"}, now=NOW)
    assert (april.start, april.end, april.label) == (
        datetime(2026, 4, 1, tzinfo=UTC),
        datetime(2026, 5, 1, tzinfo=UTC),
        "April 2026",
    )
    q2 = report_period_parse({"period": "2026-Q2"}, now=NOW)
    assert (q2.start, q2.end, q2.label) == (
        datetime(2026, 4, 1, tzinfo=UTC),
        datetime(2026, 7, 1, tzinfo=UTC),
        "Q2 2026",
    )
    q4 = report_period_parse({"period": "2026-Q4"}, now=NOW)  # still running: to the measurement
    assert (q4.period.end, q4.is_to_date) == (NOW, True)
    for bad in ("2026-13", "2026-Q5", "April", "2027-01"):
        with pytest.raises(FieldError, match="period"):
            report_period_parse({"period": bad}, now=NOW)


def test_reports_page_lists_months_and_quarters_with_downloads(finance):
    response = finance.get("/reports/tfom/")
    assert response.status_code == 200
    keys = [p.key for p in response.context["periods"]]
    assert "2026-04" in keys and "2026-Q2" in keys
    assert keys.index("2026-Q2") < keys.index("2026-04")  # newest first: Q2 ends later
    html = response.content.decode()
    for output in ("csv", "xlsx", "pdf"):
        assert f"?period=2026-04&amp;format={output}" in html


def test_report_html_shows_every_section(finance):
    response = finance.get("/reports/tfom/?period=2026-04")
    assert response.status_code == 200
    html = response.content.decode()
    for title in ("P&amp;L", "Unit economics", "KPIs", "Technical → financial mapping"):
        assert f"<h2>{title}</h2>" in html
    assert "14,931.92" in html


def test_report_impossible_period_is_a_400_naming_it(finance):
    response = finance.get("/reports/tfom/?period=2026-14")

    assert response.status_code == 400
    assert "period" in response.content.decode()


def _csv(response) -> list[dict]:
    text = response.content.decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_report_csv_round_trips_exact_figures(finance):
    response = finance.get("/reports/tfom/?period=2026-04&format=csv")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="tfom-2026-04.csv"'
    rows = _csv(response)
    figures = {(r["section"], r["key"]): r["value"] for r in rows}
    amounts = {(r["section"], r["key"]): r["amount"] for r in rows}
    assert figures[("pnl", "revenue")] == "14931.92"
    assert figures[("pnl", "cogs")] == "9385.20"
    assert figures[("pnl", "ebitda")] == "1946.72"
    assert figures[("pnl", "ebit")] == "-5253.28"
    assert figures[("pnl", "staff")] == "7200.00"  # 7,300 x 72/73
    assert figures[("pnl", "sga")] == "3600.00"
    assert figures[("kpis", "tef")] == "0.3600000000"
    assert figures[("unit_economics", "cost_per_million_tokens")] == "2.1631944444"
    assert figures[("unit_economics", "output_tokens")] == "9331200000"
    assert figures[("unit_economics", "avoided_capex")] == "87600.00"
    # technical -> financial: 1,440 GPU-h broken at (7,200 + 1,440) / 25,920,000 per GPU-s
    assert figures[("mapping", "unavailable")] == "720.0000000000"
    assert amounts[("mapping", "unavailable")] == "864.00"
    assert amounts[("mapping", "discounts")] == "-3732.98"  # 14,931.92 - 18,664.90
    # Every line is a (section, key) of the report, each once.
    assert len(figures) == len(rows)
    assert rows[0].keys() == {
        "period_start", "period_end", "section", "key", "item", "value", "unit", "amount",
        "currency", "note",
    }  # fmt: skip
    # Every line says which period it measures, [start, end).
    assert {(r["period_start"], r["period_end"]) for r in rows} == {
        ("2026-04-01T00:00:00Z", "2026-05-01T00:00:00Z")
    }
    # Round trip: every number parses back as a Decimal, negatives without a text quote.
    for row in rows:
        if row["value"]:
            Decimal(row["value"])


def test_report_xlsx_has_a_sheet_per_section_and_numeric_cells(finance):
    from openpyxl import load_workbook

    response = finance.get("/reports/tfom/?period=2026-04&format=xlsx")
    assert response.status_code == 200
    book = load_workbook(io.BytesIO(response.content))
    assert book.sheetnames == [
        "Report",
        "P&L",
        "Tie-out to the ledger",
        "Unit economics",
        "KPIs",
        "Technical to financial mapping",
        "By pool",
    ]
    pnl = {row[0].value: row[1] for row in book["P&L"].iter_rows(min_row=2)}
    assert pnl["Revenue"].data_type == "n"
    assert pnl["Revenue"].value == pytest.approx(14931.92, abs=1e-9)
    assert pnl["EBIT (operating profit)"].value == pytest.approx(-5253.28, abs=1e-9)
    assert pnl["Gross margin"].number_format == "0.0%"
    kpis = {row[0].value: row[1] for row in book["KPIs"].iter_rows(min_row=2)}
    assert kpis["TEF"].data_type == "n"
    assert kpis["TEF"].value == pytest.approx(0.36, abs=1e-12)
    units = {row[0].value: row[1] for row in book["Unit economics"].iter_rows(min_row=2)}
    assert units["Output tokens produced"].value == 9_331_200_000
    mapping = book["Technical to financial mapping"]
    assert [c.value for c in mapping[1]][:4] == ["Item", "Value", "Unit", "Amount (USD)"]
    amounts = {row[0].value: row[3].value for row in mapping.iter_rows(min_row=2)}
    assert amounts["Equivalent GPUs at the baseline TEF"] == pytest.approx(87_600)
    for sheet in book.worksheets[1:]:
        for row in sheet.iter_rows(min_row=2, min_col=2, max_col=2):
            assert row[0].value is None or row[0].data_type == "n", (sheet.title, row[0].value)


def test_report_pdf_renders_with_its_figures(finance):
    import pypdfium2

    response = finance.get("/reports/tfom/?period=2026-04&format=pdf")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    document = pypdfium2.PdfDocument(response.content)
    text = "".join(page.get_textpage().get_text_range() for page in document)
    assert "TFOM report · April 2026" in text
    assert "14,931.92" in text  # revenue
    assert "1,946.72" in text  # EBITDA
    image = document[0].render(scale=1).to_pil()
    assert image.width > 800
    # The SVG chart draws coloured bars: revenue blue, costs orange, profit green.
    colours = {colour for _, colour in image.convert("RGB").getcolors(maxcolors=1 << 24)}
    assert (0x1F, 0x6F, 0xEB) in colours and (0xD9, 0x48, 0x0F) in colours


def test_tenants_may_not_open_reports_and_operators_read_finance_s(finance, users):
    """architecture.md's roles: factory-wide TFOM is read by operators, finance and
    investors (ui.md's TFOM report), never by a tenant member."""
    path = "/reports/tfom/?period=2026-04&format=csv"
    read = {}
    for role in ("tenant", "operator"):
        reader = Client()
        reader.force_login(users[role])
        read[role] = reader.get(path)
    assert read["tenant"].status_code == 403
    assert read["operator"].status_code == 200
    assert read["operator"].content == finance.get(path).content


def test_report_xlsx_writes_a_formula_looking_name_as_text(finance, users, token_client):
    from openpyxl import load_workbook

    admin = token_client(users["operator"], scopes=["admin", "read"])
    name = '=HYPERLINK("http://attacker.invalid","click")'
    assert admin.patch("/api/v1/pools/h100-a", {"name": name}).status_code == 200

    response = finance.get("/reports/tfom/?period=2026-04&format=xlsx")
    by_pool = load_workbook(io.BytesIO(response.content))["By pool"]
    labels = [row[0] for row in by_pool.iter_rows(min_row=2)]

    assert labels and all(cell.data_type == "s" for cell in labels)
    assert labels[0].value.startswith(name)


@pytest.mark.parametrize(
    ("query", "key"),
    [
        ({"period": "2026-04"}, "2026-04"),
        ({"period": "last_month"}, "2026-10"),  # a preset names its month, not itself
        ({"period": "2026-Q2"}, "2026-Q2"),
        ({"from": "2026-11-20", "to": "2026-11-27"}, "20261120T00-20261127T00"),
    ],
)
def test_a_report_file_is_named_by_the_dates_it_covers(db, query, key):
    from flywheel.views.tfom import _file_key

    assert _file_key(report_period_parse(query, now=NOW)) == key


def test_the_report_counts_gpus_without_cents(finance):
    page = finance.get("/reports/tfom/?period=2026-04").content.decode()

    cell = page.split('data-kpi="installed_gpus">')[1].split("<")[0]
    assert cell == "10"  # not "10.00"


def test_the_reports_page_has_the_period_picker_of_every_page(finance):
    index = finance.get("/reports/tfom/").content.decode()
    picked = finance.get("/reports/tfom/", {"period": "last_30_days"})

    assert 'class="period-picker"' in index and 'name="period"' in index
    assert picked.status_code == 200 and "TFOM report" in picked.content.decode()
