import io

import pytest

from portal.demo import demo_run

from .conftest import login, screenshot

pytestmark = pytest.mark.e2e


@pytest.fixture
def demo(transactional_db):
    demo_run(stdout=io.StringIO())


def _points(page, selector: str) -> int:
    return page.evaluate(
        f"() => document.querySelector('{selector}').data.reduce((n, t) => n + t.y.filter(v => v > 0).length, 0)"
    )


def test_tenant_usage_page_shows_a_filled_chart_of_own_usage(demo, page):
    login(page, "acme", "acme-demo")
    page.goto("/usage/")
    page.wait_for_selector("#usage-chart .main-svg")

    # The last 30 days hold 29 demo days (today has no data yet), three models each.
    assert _points(page, "#usage-chart") == 29 * 3
    assert page.get_by_label("Tenant").count() == 0  # a member sees no tenant picker
    assert "Download CSV" in page.content()
    screenshot(page, "usage-tenant")


def test_operator_metering_page_shows_capacity_of_every_pool(demo, page):
    login(page, "operator", "operator-demo")
    page.goto("/metering/")
    for pool in ("h100-a", "h200-a", "b200-a"):
        page.wait_for_selector(f"#capacity-{pool} .main-svg")
        assert _points(page, f"#capacity-{pool}") >= 3 * 24 * 29
    assert page.get_by_role("cell", name="deepseek-r1").is_visible()
    screenshot(page, "metering-operator")
