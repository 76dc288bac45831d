from datetime import timedelta

import pytest

from metering.models import Deployment, Pool, ScrapeTarget
from portal import clock
from tests.e2e.conftest import chart_points, login, screenshot

pytestmark = pytest.mark.e2e


def test_tenant_usage_page_shows_a_filled_chart_of_own_usage(demo, page):
    login(page, "acme", "acme-demo")
    page.goto("/usage/")
    page.wait_for_selector("#usage-chart .main-svg")

    # The last 30 days: 29 whole demo days and today up to its last whole hour (the window
    # of kpis.md section 0, as every other page reads), three models each.
    assert chart_points(page, "#usage-chart") == 30 * 3
    assert page.get_by_label("Tenant").count() == 0  # a member sees no tenant picker
    assert page.get_by_role("link", name="Download CSV (90 rows)").is_visible()
    assert page.get_by_text("Page 1 of 2").is_visible()
    # The token classes inside input and output: Acme writes to the prompt cache, and
    # DeepSeek-R1 and Qwen3 reason.
    table = page.get_by_role("table", name="Usage by day and model")
    for header in ("Cached", "Cache writes", "Reasoning"):
        assert table.get_by_role("columnheader", name=header, exact=True).is_visible()
    assert page.get_by_text("of which reasoning").is_visible()
    assert page.get_by_text("written to cache").is_visible()
    screenshot(page, "usage-tenant")

    page.get_by_role("link", name="Next →").click()
    page.wait_for_selector("#usage-chart .main-svg")
    assert page.get_by_text("Rows 51–90 of 90").is_visible()
    screenshot(page, "usage-tenant-page-2")


def test_operator_metering_page_shows_capacity_of_every_pool(demo, page):
    login(page, "operator", "operator-demo")
    page.goto("/metering/")
    for pool in ("h100-a", "h200-a", "b200-a"):
        page.wait_for_selector(f"#capacity-{pool} .main-svg")
        assert chart_points(page, f"#capacity-{pool}") >= 3 * 24 * 29
    assert page.get_by_role("cell", name="deepseek-r1", exact=True).is_visible()
    # The demo's engine telemetry disagrees with metering in two deployment-hours.
    flagged = page.get_by_role("table", name="Flagged deployment-hours")
    assert flagged.get_by_role("row").count() == 1 + 2
    assert flagged.get_by_role("cell", name="deepseek-r1@b200-a").is_visible()
    assert page.get_by_text(
        "No scrape targets: add one with POST /api/v1/scrape-targets"
    ).is_visible()
    screenshot(page, "metering-operator")


def test_operator_metering_page_shows_scrape_target_health(demo, page):
    now = clock.now()
    pool = Pool.objects.get(slug="h100-a")
    ScrapeTarget.objects.create(
        url="http://vllm-0.h100-a.internal:8000/metrics",
        kind="vllm",
        pool=pool,
        deployment=Deployment.objects.get(pool=pool),
        last_scraped_at=now,
        last_status=ScrapeTarget.Status.OK,
    )
    ScrapeTarget.objects.create(
        url="http://dcgm-exporter.h100-a.internal:9400/metrics",
        kind="dcgm",
        pool=pool,
        last_scraped_at=now,
        last_status=ScrapeTarget.Status.FAILED,
        last_error="URLError: <urlopen error [Errno 111] Connection refused>",
        consecutive_failures=12,
    )
    ScrapeTarget.objects.create(
        url="http://sglang-0.b200-a.internal:30000/metrics",
        kind="sglang",
        pool=Pool.objects.get(slug="b200-a"),
        last_scraped_at=now - timedelta(minutes=20),
        last_status=ScrapeTarget.Status.OK,
        last_unknown_models=["deepseek-r1-distill"],
    )
    ScrapeTarget.objects.create(
        url="http://vllm-1.h200-a.internal:8000/metrics",
        kind="vllm",
        pool=Pool.objects.get(slug="h200-a"),
        enabled=False,
    )

    login(page, "operator", "operator-demo")
    page.goto("/metering/#scrape-targets")
    rows = page.get_by_role("table", name="Scrape targets").get_by_role("row")
    # Unhealthy first, then by pool and URL; the status says it in words, not colour alone.
    assert [
        (row.get_by_role("cell").nth(1).inner_text(), row.locator(".badge").inner_text())
        for row in rows.all()[1:]
    ] == [
        ("http://sglang-0.b200-a.internal:30000/metrics", "Stale"),
        ("http://dcgm-exporter.h100-a.internal:9400/metrics", "Failing"),
        ("http://vllm-0.h100-a.internal:8000/metrics", "OK"),
        ("http://vllm-1.h200-a.internal:8000/metrics", "Disabled"),
    ]
    screenshot(page, "metering-scrape-targets")
