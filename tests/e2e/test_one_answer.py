"""One period, one answer (kpis.md section 0): for every kind of period, finance sees the same
TEF, TFI and realized revenue on Overview, Investor, Flywheel and the TFOM report (HTML, CSV
and XLSX) as GET /api/v1/kpis returns, the same output tokens on the usage page and in its
CSV, and the same revenue and gross margin on Investor,
the report and GET /api/v1/tfom, each to the precision it is displayed (the flywheel's
monthly revenue and EBITDA too, for a calendar month). On the 1st of a
month at 08:37 and mid-month."""

import csv
import io
from decimal import ROUND_HALF_UP, Decimal
from urllib.parse import urlencode

import pytest

from tests.conftest import CLOCKS
from tests.e2e.conftest import login, screenshot

pytestmark = pytest.mark.e2e

PRESETS = {
    "this-month": {"period": "this_month"},
    "last-month": {"period": "last_month"},
    "last-30-days": {"period": "last_30_days"},
    "last-90-days": {"period": "last_90_days"},
    "quarter": {"period": "2026-Q4"},
    "custom": {"from": "2026-11-20", "to": "2026-12-01T06:00:00Z"},
}


def _pct(value) -> str:
    return "—" if value is None else f"{float(value) * 100:.1f}%"


def _money(value: str) -> str:
    return f"{Decimal(value):,.2f}"


def _whole(value: str) -> str:
    cents = Decimal(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"{cents.quantize(Decimal(1), rounding=ROUND_HALF_UP):,}"


def _shown(page, key: str) -> set[str]:
    """Every text the page displays for one figure (data-kpi marks them)."""
    texts = page.locator(f'[data-kpi="{key}"]').all_inner_texts()
    assert texts, f"{page.url}: no {key} shown"
    return {text.strip() for text in texts}


# Every preset in one test at each clock: the pages only read, and restoring a fresh copy of
# the demo for each preset cost as much as reading its pages.
@pytest.mark.parametrize(
    "now",
    [CLOCKS["month-start"], CLOCKS["mid-month"]],
    ids=["month-start", "mid-month"],
    indirect=True,
)
def test_every_page_and_export_gives_the_api_figures(now, demo, page):
    login(page, "finance", "finance-demo")
    for preset in PRESETS:
        _one_answer(page, now, preset)


def _one_answer(page, now, preset: str) -> None:
    """The figures of `preset` on every page and export, against the API's."""
    query = urlencode(PRESETS[preset])
    kpis = page.request.get(f"/api/v1/kpis?{query}").json()
    tfom = page.request.get(f"/api/v1/tfom?{query}").json()
    assert kpis["empty_reason"] is None and tfom["empty_reason"] is None, (preset, kpis, tfom)
    assert (kpis["from"], kpis["to"]) == (tfom["from"], tfom["to"])
    assert (kpis["tef"], kpis["tfi"], kpis["realized_revenue"]) == (
        tfom["tef"], tfom["tfi"], tfom["realized_revenue"],
    )  # fmt: skip
    tef, tfi = _pct(kpis["tef"]), _pct(kpis["tfi"])
    assert kpis["tef"] > 0 and Decimal(tfom["revenue"]) > 0

    page.goto(f"/?{query}")
    assert _shown(page, "tef") == {tef} and _shown(page, "tfi") == {tfi}
    # A dashboard: whole units (ui.md, Numbers), the cents on hover.
    assert _shown(page, "realized_revenue") == {_whole(kpis["realized_revenue"])}
    title = page.locator('[data-kpi="realized_revenue"]').get_attribute("title")
    assert title == f"{_money(kpis['realized_revenue'])} USD"
    if preset in ("this-month", "custom"):
        screenshot(page, f"one-answer-overview-{preset}-{now:%d}")

    page.goto(f"/usage/?{query}")  # every tenant's tokens by day: the same window
    output = page.locator('[data-kpi="output_tokens"]').get_attribute("title")
    assert output == f"{kpis['output_tokens']:,}"
    usage_csv = csv.DictReader(io.StringIO(page.request.get(f"/usage/?{query}&format=csv").text()))
    assert sum(int(row["output_tokens"]) for row in usage_csv) == kpis["output_tokens"]

    page.goto(f"/investor/?{query}")
    assert _shown(page, "tef") == {tef} and _shown(page, "tfi") == {tfi}
    assert _shown(page, "realized_revenue") == {_whole(kpis["realized_revenue"])}
    assert _shown(page, "revenue") == {_whole(tfom["revenue"])}
    assert _shown(page, "gross_margin") == {_pct(tfom["gross_margin"])}

    page.goto(f"/flywheel/?{query}")
    assert _shown(page, "tef") == {tef} and _shown(page, "tfi") == {tfi}
    assert _shown(page, "gross_margin") == {_pct(tfom["gross_margin"])}
    if preset == "last-month":  # a calendar month: the flywheel's monthly figures are its own
        assert _shown(page, "ebitda_per_month") == {_whole(tfom["ebitda"])}
        assert _shown(page, "revenue_per_month") == {_whole(tfom["revenue"])}

    page.goto(f"/reports/tfom/?{query}")
    assert _shown(page, "tef") == {tef} and _shown(page, "tfi") == {tfi}
    assert _shown(page, "realized_revenue") == {_money(kpis["realized_revenue"])}
    assert _shown(page, "revenue") == {_money(tfom["revenue"])}
    assert _shown(page, "gross_margin") == {_pct(tfom["gross_margin"])}
    if preset in ("this-month", "custom"):
        screenshot(page, f"one-answer-report-{preset}-{now:%d}")

    exported = page.request.get(f"/reports/tfom/?{query}&format=csv")
    rows = {row["key"]: row["value"] for row in csv.DictReader(io.StringIO(exported.text()))}
    _assert_export({key: rows[key] for key in LABELS.values()}, kpis, tfom)
    _assert_export(
        _xlsx_figures(page.request.get(f"/reports/tfom/?{query}&format=xlsx")), kpis, tfom
    )


def _assert_export(values: dict, kpis: dict, tfom: dict) -> None:
    """Exports carry ratios to 1e-10 and money to the cent: the API's figures exactly there."""
    assert abs(Decimal(str(values["tef"])) - Decimal(str(kpis["tef"]))) < Decimal("1e-9")
    assert abs(Decimal(str(values["tfi"])) - Decimal(str(kpis["tfi"]))) < Decimal("1e-9")
    assert abs(Decimal(str(values["gross_margin"])) - Decimal(str(tfom["gross_margin"]))) < Decimal(
        "1e-9"
    )
    assert Decimal(str(values["realized_revenue"])) == Decimal(kpis["realized_revenue"])
    assert Decimal(str(values["revenue"])) == Decimal(tfom["revenue"])


LABELS = {
    "TEF": "tef",
    "TFI": "tfi",
    "Realized revenue": "realized_revenue",
    "Revenue": "revenue",
    "Gross margin": "gross_margin",
}


def _xlsx_figures(response) -> dict:
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(response.body()))
    found: dict[str, object] = {}
    for sheet in book.worksheets[1:]:
        for label, value, *_ in sheet.iter_rows(min_row=2, values_only=True):
            key = LABELS.get(label)
            if key is not None:
                assert isinstance(value, int | float), (label, value)  # a number, not text
                assert found.setdefault(key, value) == value, label  # the same on every sheet
    assert found.keys() == set(LABELS.values()), found
    return found
