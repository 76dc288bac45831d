"""The capacity plan in the browser on the demo factory (ui.md "Capacity plan"): GPUs needed
against installed per pool, the plan in money, plan against actual for last month, and each
model's reference curves with the SLO's operating point."""

import pytest

from tests.e2e.conftest import SCREENSHOTS, login, screenshot

pytestmark = pytest.mark.e2e


def test_the_capacity_plan_reads_the_stored_plan_and_the_curves(demo, page):
    login(page, "investor", "investor-demo")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Capacity plan").click()
    page.wait_for_selector("#gpus-chart .main-svg")
    bars = page.evaluate(
        "() => document.querySelector('#gpus-chart').data"
        ".filter(t => t.type === 'bar').reduce((n, t) => n + t.y.filter(v => v > 0).length, 0)"
    )
    assert bars == 3 * 12  # 3 pools, 12 months, each needed
    # Last month ended: the plan as it stood at its start beside what it measured
    ended = page.get_by_role("table", name="Plan against actual").locator("[data-ended]")
    assert ended.count() == 1
    # A curve per model and GPU, a star at the SLO where it is feasible, B300 not bought
    stars = page.evaluate(
        "() => [...document.querySelectorAll('[data-curves] .chart')].map(c => c.data"
        ".filter(t => t.marker && t.marker.symbol === 'star').length)"
    )
    assert stars == [2, 2, 2]
    assert page.get_by_text("no pool of this GPU type").is_visible()
    assert page.locator("main form[method='post']").count() == 0  # read-only
    screenshot(page, "capacity-plan-investor")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("[data-curves='deepseek-r1']").screenshot(
        path=str(SCREENSHOTS / "capacity-plan-curve.png")
    )
