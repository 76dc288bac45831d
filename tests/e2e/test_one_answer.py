"""One period, one answer (kpis.md section 0): for every kind of period, finance sees the same
TEF, TFI and realized revenue on Overview, Investor, Flywheel and the TFOM report (HTML, CSV
and XLSX) as GET /api/v1/kpis returns, the same output tokens on the usage page and in its
CSV, and the same revenue and gross margin on Investor,
the report and GET /api/v1/tfom, each to the precision it is displayed (the flywheel's
monthly revenue and EBITDA too, for a calendar month). On the 1st of a
month at 08:37 and mid-month; and again while a gateway keeps sending requests of the
running hour (timed a second and two minutes ago), which a real worker folds, rates and
measures: every page is compared with the API read just before it, provided the KPIs read
just after it are the same (kpis.md section 0: every read of an open period answers for the
same window with the same figures)."""

import csv
import io
import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal
from functools import partial
from urllib.parse import urlencode

import pytest

from tests.conftest import clocks_in_ci
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
# the demo for each preset cost as much as reading its pages. `make test` reads them
# mid-month, `make soak` at every clock.
@pytest.mark.parametrize("now", clocks_in_ci("mid-month"), indirect=True)
def test_every_page_and_export_gives_the_api_figures(now, demo, page):
    login(page, "finance", "finance-demo")
    for preset in PRESETS:
        _one_answer(page, now, preset)


@pytest.mark.integration
@pytest.mark.parametrize("now", [p for p in clocks_in_ci() if p.id == "month-start"], indirect=True)
def test_every_page_agrees_while_requests_of_the_running_hour_arrive(
    now, demo, pipeline_worker, page
):
    """The periods the running hour belongs to, at 08:37 (37 minutes of it measured), while a
    gateway keeps sending requests of that hour. `make soak` runs it (it builds the demo of
    the 1st); `make test` holds the same promise without the demo in
    tests/e2e/test_running_hour.py (requests of the running hour reach every read)."""
    login(page, "finance", "finance-demo")
    output = page.request.get("/api/v1/kpis?period=this_month").json()["output_tokens"]
    with _arriving(now) as batches:
        for preset in ("this-month", "last-30-days", "quarter"):
            _one_answer(page, now, preset, arriving=True)
    # Requests kept arriving while the pages were read (the first as they began, then one
    # every 10 s), and the figures move with them once the worker has run them.
    assert len(batches) >= 1, batches
    deadline = time.monotonic() + 60
    while page.request.get("/api/v1/kpis?period=this_month").json()["output_tokens"] == output:
        assert time.monotonic() < deadline, "the arriving requests never reached the KPIs"
        time.sleep(1)


@contextmanager
def _arriving(now):
    """A gateway posting a batch of two requests of acme at once, then every 10 seconds
    (through the API, in a thread of its own; the worker runs the stages) until the block
    ends; yields the list of the batches accepted, the first in before it does."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from rest_framework.test import APIClient

    from portal.services import token_create

    operator = get_user_model().objects.get(username="operator")
    _, raw = token_create(user=operator, name="gateway", scopes=["ingest"])
    accepted: list[int] = []
    refused: list[bytes] = []
    stop, first = threading.Event(), threading.Event()

    def post() -> None:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        try:
            while not refused:
                n = len(accepted)
                events = [
                    {"id": f"arriving-{n}-{i}", "time": (now - ago).isoformat(),
                     "tenant": "acme", "model": "llama-3.3-70b", "input_tokens": 300,
                     "output_tokens": 100 + n}
                    for i, ago in enumerate((timedelta(seconds=1), timedelta(minutes=2)))
                ]  # fmt: skip
                response = api.post("/api/v1/usage/events", events, format="json")
                if response.status_code != 200:
                    refused.append(response.content)
                accepted.append(n)
                first.set()
                if stop.wait(10):
                    break
        finally:
            first.set()
            connection.close()

    thread = threading.Thread(target=post, name="gateway")
    thread.start()
    first.wait(60)  # the first batch is in before the reads begin
    try:
        yield accepted
    finally:
        stop.set()
        thread.join(timeout=120)
    assert not refused, refused


def _api(page, query: str) -> tuple[dict, dict]:
    return (
        page.request.get(f"/api/v1/kpis?{query}").json(),
        page.request.get(f"/api/v1/tfom?{query}").json(),
    )


def _against_api(page, query: str, check) -> None:
    """`check(kpis, tfom)` (it reads a page or an export and asserts its figures) against
    the API read just before it, provided the KPIs read just after it are the same: a
    request arriving meanwhile moves them (its output tokens at least), and then it is
    checked again."""
    for _ in range(30):
        before = _api(page, query)
        failure = None
        try:
            check(*before)
        except AssertionError as error:
            failure = error
        if page.request.get(f"/api/v1/kpis?{query}").json() == before[0]:
            if failure is not None:
                raise failure
            return
    pytest.fail(f"the figures of {query} moved during every one of 30 reads")


def _one_answer(page, now, preset: str, *, arriving: bool = False) -> None:
    """The figures of `preset` on every page and export, against the API's."""
    query = urlencode(PRESETS[preset])
    kpis, tfom = _api(page, query)
    assert kpis["empty_reason"] is None and tfom["empty_reason"] is None, (preset, kpis, tfom)
    assert (kpis["from"], kpis["to"]) == (tfom["from"], tfom["to"])
    for check in (_the_api, _overview, _usage, _investor, _flywheel, _report):
        against = partial(check, page, query) if check is not _the_api else check
        if arriving:
            _against_api(page, query, against)
        else:
            against(kpis, tfom)
    if preset in ("this-month", "custom"):
        page.goto(f"/?{query}")
        screenshot(page, f"one-answer-overview-{preset}-{now:%d}")
        page.goto(f"/reports/tfom/?{query}")
        screenshot(page, f"one-answer-report-{preset}-{now:%d}")


def _the_api(kpis, tfom) -> None:
    assert (kpis["tef"], kpis["tfi"], kpis["realized_revenue"]) == (
        tfom["tef"], tfom["tfi"], tfom["realized_revenue"],
    )  # fmt: skip
    assert kpis["tef"] > 0 and Decimal(tfom["revenue"]) > 0


def _overview(page, query, kpis, tfom) -> None:
    tef, tfi = _pct(kpis["tef"]), _pct(kpis["tfi"])
    page.goto(f"/?{query}")
    assert _shown(page, "tef") == {tef} and _shown(page, "tfi") == {tfi}
    # A dashboard: whole units (ui.md, Numbers), the cents on hover.
    assert _shown(page, "realized_revenue") == {_whole(kpis["realized_revenue"])}
    title = page.locator('[data-kpi="realized_revenue"]').get_attribute("title")
    assert title == f"{_money(kpis['realized_revenue'])} USD"


def _usage(page, query, kpis, tfom) -> None:
    page.goto(f"/usage/?{query}")  # every tenant's tokens by day: the same window
    output = page.locator('[data-kpi="output_tokens"]').get_attribute("title")
    assert output == f"{kpis['output_tokens']:,}"
    usage_csv = csv.DictReader(io.StringIO(page.request.get(f"/usage/?{query}&format=csv").text()))
    assert sum(int(row["output_tokens"]) for row in usage_csv) == kpis["output_tokens"]


def _investor(page, query, kpis, tfom) -> None:
    page.goto(f"/investor/?{query}")
    assert _shown(page, "tef") == {_pct(kpis["tef"])} and _shown(page, "tfi") == {_pct(kpis["tfi"])}
    assert _shown(page, "realized_revenue") == {_whole(kpis["realized_revenue"])}
    assert _shown(page, "revenue") == {_whole(tfom["revenue"])}
    assert _shown(page, "gross_margin") == {_pct(tfom["gross_margin"])}


def _flywheel(page, query, kpis, tfom) -> None:
    page.goto(f"/flywheel/?{query}")
    assert _shown(page, "tef") == {_pct(kpis["tef"])} and _shown(page, "tfi") == {_pct(kpis["tfi"])}
    assert _shown(page, "gross_margin") == {_pct(tfom["gross_margin"])}
    if "period=last_month" in query:  # a calendar month: the flywheel's monthly figures
        assert _shown(page, "ebitda_per_month") == {_whole(tfom["ebitda"])}
        assert _shown(page, "revenue_per_month") == {_whole(tfom["revenue"])}


def _report(page, query, kpis, tfom) -> None:
    page.goto(f"/reports/tfom/?{query}")
    assert _shown(page, "tef") == {_pct(kpis["tef"])} and _shown(page, "tfi") == {_pct(kpis["tfi"])}
    assert _shown(page, "realized_revenue") == {_money(kpis["realized_revenue"])}
    assert _shown(page, "revenue") == {_money(tfom["revenue"])}
    assert _shown(page, "gross_margin") == {_pct(tfom["gross_margin"])}
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
