"""The projects and chargeback page in the browser (ui.md "Projects and chargeback"), on the
April example with projects (tests/flywheel/test_chargeback_api.py): finance reads acme's
projects, both bases and downloads the XLSX; a member of another tenant sees nothing of it."""

import io

import pytest
from openpyxl import load_workbook

from tests.conftest import PASSWORD
from tests.e2e.conftest import SCREENSHOTS, login, screenshot
from tests.flywheel.test_chargeback_api import april  # noqa: F401 (a fixture)

pytestmark = pytest.mark.e2e


def test_finance_reads_a_tenants_projects_and_chargeback(april, users, page, transactional_db):  # noqa: F811
    login(page, users["finance"].username, PASSWORD)
    page.goto("/projects/?tenant=acme&month=2026-04")
    projects = page.get_by_role("table", name="Projects")
    assert projects.get_by_role("row", name="alpha").is_visible()
    invoice = page.get_by_role("table", name="Chargeback, invoice basis")
    assert "8,959.15" in invoice.get_by_role("row", name="alpha").inner_text()
    cost = page.get_by_role("table", name="Chargeback at cost")
    assert "12,111.12" in cost.get_by_role("row", name="alpha").inner_text()
    screenshot(page, "projects-chargeback")

    xlsx = page.request.get("/api/v1/chargeback?month=2026-04&tenant=acme&format=xlsx")
    sheet = load_workbook(io.BytesIO(xlsx.body())).active
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "projects-chargeback.xlsx").write_bytes(xlsx.body())
    assert sheet["A1"].value == "Chargeback April 2026, invoice basis"

    page.context.clear_cookies()
    login(page, users["tenant"].username, PASSWORD)  # tenant-a's member: acme is not its own
    page.goto("/projects/?month=2026-04")
    assert "No usage rated in April 2026" in page.content()
    assert "alpha" not in page.get_by_role("table", name="Chargeback, invoice basis").inner_text()
