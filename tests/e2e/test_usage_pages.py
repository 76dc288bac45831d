import re
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
    # Today so far is a partial day (ui.md, Partial periods): its bars alone are hatched.
    shapes = page.evaluate(
        "() => document.querySelector('#usage-chart').data.map(t => t.marker.pattern.shape)"
    )
    assert shapes == [[""] * 29 + ["/"]] * 3
    assert page.get_by_text("Hatched bars: a day counted only in part").is_visible()
    assert page.get_by_label("Tenant").count() == 0  # a member sees no tenant picker
    # A row per day, model, project and service tier: acme meters four projects and a few
    # hours of none, at three tiers (demo-factory.md, "Projects" and "Service tiers"); its
    # picker offers the projects, none included.
    options = page.locator("#project option").evaluate_all("os => os.map(o => o.value)")
    assert options == ["", "code-review", "eval", "search", "support-bot", "(none)"]
    csv_link = page.get_by_role("link", name=re.compile(r"Download CSV \([\d,]+ rows\)"))
    rows = int(re.search(r"\(([\d,]+) rows", csv_link.inner_text()).group(1).replace(",", ""))
    assert 90 < rows <= 30 * 3 * 5 * 3
    assert page.get_by_text(f"Page 1 of {-(-rows // 50)}").is_visible()
    # The token classes inside input and output: Acme writes to the prompt cache, and
    # DeepSeek-R1 and Qwen3 reason.
    table = page.get_by_role("table", name="Usage by day, model and project")
    for header in ("Cached", "Cache writes", "Reasoning"):
        assert table.get_by_role("columnheader", name=header, exact=True).is_visible()
    assert page.get_by_text("of which reasoning").is_visible()
    assert page.get_by_text("written to cache").is_visible()
    screenshot(page, "usage-tenant")

    page.get_by_role("link", name="Next →").click()
    page.wait_for_selector("#usage-chart .main-svg")
    assert page.get_by_text(f"Rows 51–100 of {rows:,}").is_visible()
    screenshot(page, "usage-tenant-page-2")

    page.locator("#project").select_option("search")
    page.wait_for_selector("#usage-chart .main-svg")
    table = page.get_by_role("table", name="Usage by day, model and project")
    projects = table.locator("tbody tr td:nth-child(3)").all_inner_texts()
    assert set(projects) == {"search"}
    screenshot(page, "usage-tenant-project")


def test_operator_metering_page_shows_capacity_of_every_pool(demo, page):
    login(page, "operator", "operator-demo")
    page.goto("/metering/")
    for pool in ("h100-a", "h200-a", "b200-a"):
        page.wait_for_selector(f"#capacity-{pool} .main-svg")
        lines = page.evaluate(
            f"() => document.querySelector('#capacity-{pool}').data.map(t => "
            "[t.x.length, (Date.parse(t.x[t.x.length - 1]) - Date.parse(t.x[0])) / 36e5])"
        )
        # Installed, healthy and busy at the samples where any of them changes (the demo's
        # busy GPUs change in most hours), from the window's first hourly sample to its
        # last: 705 hours.
        (kept, _), *others = lines
        assert [hours for _, hours in lines] == [705, 705, 705]
        assert [n for n, _ in others] == [kept, kept] and kept > 705 // 2
    # One hover lists all three lines at the time under the pointer.
    plot = page.locator("#capacity-h100-a .nsewdrag").first.bounding_box()
    page.mouse.move(plot["x"] + plot["width"] / 2, plot["y"] + plot["height"] / 2)
    hover = "document.querySelector('#capacity-h100-a .hoverlayer').textContent"
    page.wait_for_function(f"() => {hover}.includes('busy')")
    text = page.evaluate(f"() => {hover}")
    assert " UTC" in text  # the time under the pointer, its zone named
    assert all(f"h100-a {line} : " in text for line in ("installed", "healthy", "busy"))
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


def test_operator_metering_page_shows_the_ingestion_debugger(demo, page, now):
    """A misconfigured gateway found in a minute: its refused batch (no payload) and a
    source gone silent while its deployment's engine keeps generating."""
    import json

    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from metering.models import EngineHourly, SourceSeen
    from portal.periods import hour_floor
    from portal.services import token_create

    operator = get_user_model().objects.get(username="operator")
    _, raw = token_create(user=operator, name="gateway-eu",
                          scopes=["ingest"])  # fmt: skip
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    bad = [{"id": "r1", "source": "gateway-eu", "time": now.isoformat(), "tenant": "acme",
            "model": "llama-3.3-70b", "input_tokens": 10, "output_tokens": 5,
            "reasoning_tokens": 6}]  # fmt: skip
    response = api.post("/api/v1/usage/events", json.dumps(bad), content_type="application/json")
    assert response.status_code == 400
    deployment = Deployment.objects.get(model__slug="llama-3.3-70b")
    SourceSeen.objects.create(source="gateway-eu", deployment=deployment,
                              last_event_at=now - timedelta(minutes=41),
                              last_received_at=now - timedelta(minutes=40))  # fmt: skip
    EngineHourly.objects.update_or_create(
        deployment=deployment, hour=hour_floor(now),
        defaults={"generation_tokens": 9_000_000, "intervals": 4,
                  "last_observed_at": now - timedelta(minutes=1)},
    )  # fmt: skip

    login(page, "operator", "operator-demo")
    page.goto("/metering/#ingestion")
    sources = page.get_by_role("table", name="Ingestion sources")
    silent = sources.get_by_role("row").filter(has_text="gateway-eu")
    assert silent.locator(".badge").inner_text() == "Silent"
    rejected = page.get_by_role("table", name="Rejected batches").get_by_role("row").nth(1)
    assert "/api/v1/usage/events" in rejected.inner_text()
    assert "reasoning_tokens" in rejected.inner_text()
    assert "must not exceed output_tokens (5)" in rejected.inner_text()
    page.locator("#ingestion").scroll_into_view_if_needed()
    screenshot(page, "metering-ingestion")
