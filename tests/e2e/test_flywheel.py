import re
from datetime import timedelta
from urllib.parse import urlencode

import pytest

from portal.formatting import rfc3339
from tests.e2e.conftest import login, screenshot

pytestmark = pytest.mark.e2e


def _number(text: str) -> float:
    return float(re.sub(r"[^0-9.\-]", "", text))


def _bars(page, selector: str, trace: int = 0) -> list:
    return page.evaluate(f"() => document.querySelector('{selector}').data[{trace}].x")


def test_moving_a_factor_slider_changes_the_projected_tfi_and_ebitda(demo, page, now):
    login(page, "operator", "operator-demo")
    nav = page.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="Flywheel").is_visible()
    page.goto("/flywheel/")
    page.wait_for_selector("#diagnosis-chart .main-svg")
    page.wait_for_selector("#scenario-chart .main-svg")

    # The diagnosis ranks six factors with their monthly EBITDA gains, bottleneck first.
    gains = page.evaluate("() => document.querySelector('#diagnosis-chart').data[0].x")
    assert len(gains) == 6 and gains == sorted(gains, reverse=True) and gains[0] > 0
    bottleneck = page.locator("#bottleneck").inner_text()
    first = page.evaluate("() => document.querySelector('#diagnosis-chart').data[0].y[0]")
    assert first == bottleneck
    evidence = page.locator("details.evidence[open]").first
    assert evidence.get_by_role("table").get_by_role("row").count() >= 2
    assert page.get_by_role("table", name="Goal criteria").is_visible()
    assert page.get_by_role("table", name="Levers").get_by_role("row").count() == 1 + 11
    # The goal's cheapest lever sets under measured and unlimited demand differ.
    measured_set = page.locator("#goal-proposal-measured .badge.target").all_inner_texts()
    unlimited_set = page.locator("#goal-proposal-unlimited .badge.target").all_inner_texts()
    assert measured_set and unlimited_set and measured_set != unlimited_set

    tfi_before = page.locator("#projected-tfi").inner_text()
    ebitda_before = page.locator("#projected-ebitda").inner_text()
    measured_occupancy = float(page.locator("#slider-occupancy").get_attribute("data-measured"))
    assert 40 < measured_occupancy < 70  # the demo sells about 55% of its healthy GPU time

    # Under the measured demand (the default) a busier GPU sells nothing more.
    page.locator("#slider-occupancy").fill("75")
    page.wait_for_function(
        "() => document.querySelector('#scenario-status').textContent.startsWith('Projected')"
    )
    assert page.locator("#value-occupancy").inner_text() == "75.0%"
    assert page.locator("#projected-tfi").inner_text() == tfi_before
    assert "measured demand" in page.locator("#scenario-demand-label").inner_text()
    # If demand follows, it does.
    page.select_option("#scenario-demand", "unlimited")
    page.wait_for_function(
        f"() => document.querySelector('#projected-tfi').textContent !== {tfi_before!r}"
    )
    assert _number(page.locator("#projected-tfi").inner_text()) > _number(tfi_before)
    assert _number(page.locator("#projected-ebitda").inner_text()) > _number(ebitda_before)
    projected = page.evaluate("() => document.querySelector('#scenario-chart').data[1].y")
    assert projected[1] == pytest.approx(75.0)  # β, the second factor
    assert "+" in page.locator("#delta-ebitda").inner_text()
    screenshot(page, "flywheel-slider")

    # A lever adds its multiplier and its cost; the goal of the scenario is checked.
    ebitda_slider = page.locator("#projected-ebitda").inner_text()
    page.get_by_role("checkbox", name=re.compile("Discount recovery")).check()
    page.wait_for_function(
        f"() => document.querySelector('#projected-ebitda').textContent !== {ebitda_slider!r}"
    )
    assert _number(page.locator("#projected-cost").inner_text()) == 190_000  # 10k + 12 × 15k
    assert page.locator("#scenario-goal").get_by_text(re.compile("goal (met|not met)")).is_visible()
    screenshot(page, "flywheel")

    # Growing demand: twelve months charted, served never above demand nor capacity.
    page.select_option("#scenario-demand", "growth")
    page.wait_for_selector("#growth-chart .main-svg")
    series = page.evaluate("() => document.querySelector('#growth-chart').data.map(t => t.y)")
    demand, capacity, served = series
    assert len(served) == 12 and all(s > 0 for s in served)
    assert all(s <= min(d, c) * 1.000001 for s, d, c in zip(served, demand, capacity, strict=True))
    assert "month" in page.locator("#growth-note").inner_text()
    # In a unit that keeps the ticks under a thousand (the demo's ~10^13 tokens a month: never
    # "10k" billion).
    assert max(map(max, series)) < 1000
    assert page.locator("#growth-chart .g-ytitle").text_content() in (
        "Billion tokens",
        "Trillion tokens",
    )
    screenshot(page, "flywheel-growth")

    # A cycle queued from the page after the demo's last one ran: the history says so and
    # follows it (the page is back from the button at ?queued=, the moment it queued it).
    assert page.get_by_role("button", name=re.compile("Queue a cycle")).count() == 1
    queued = urlencode({"queued": rfc3339(now + timedelta(seconds=1))})
    page.goto(f"/flywheel/?{queued}")
    row = page.get_by_role("table", name="Cycles").locator("tr.queued")
    assert "queued" in row.inner_text() and page.locator("#cycles[hx-trigger]").count() == 1
    row.scroll_into_view_if_needed()
    screenshot(page, "flywheel-cycle-queued")


def test_finance_reads_the_flywheel_without_operator_forms(demo, page):
    login(page, "finance", "finance-demo")
    page.goto("/flywheel/")
    page.wait_for_selector("#diagnosis-chart .main-svg")
    assert page.get_by_role("table", name="Cycles").get_by_role("row").count() == 2
    assert page.get_by_role("button", name="Mark applied").count() == 0
    assert page.get_by_role("button", name=re.compile("Queue a cycle")).count() == 0
    screenshot(page, "flywheel-finance")
