"""The cockpit in the browser on the demo factory (ui.md "Cockpit"): market figures with a
labelled quadrant and a cohort heatmap, retention that says why the 3- and 12-month figures
are missing, and a forecast for the factory, each pool and each model with its accuracy."""

import pytest

from flywheel.models import Forecast
from metering.selectors.factory import pool_list, served_model_list
from tests.e2e.conftest import SCREENSHOTS, login, screenshot

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("role", ["operator", "finance", "investor"])
def test_the_cockpit_reads_the_market_and_the_forecasts(role, demo, page):
    login(page, role, f"{role}-demo")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Cockpit").click()
    page.wait_for_selector("#quadrant-chart .main-svg")
    for chart in ("#cohort-chart", "#forecast-chart-tokens", "#forecast-chart-revenue"):
        page.wait_for_selector(f"{chart} .main-svg")
    # The quadrant: one dot per tenant with revenue, every one named on the plot
    tenants = page.evaluate(
        "() => document.querySelector('#quadrant-chart').data.reduce((n, t) => n + t.x.length, 0)"
    )
    names = page.evaluate(
        "() => document.querySelector('#quadrant-chart').layout.annotations"
        ".filter(a => a.showarrow).length"
    )
    assert tenants >= 10 and names == tenants
    assert (
        page.get_by_text("highly concentrated")
        .or_(page.get_by_text("moderately concentrated"))
        .or_(page.get_by_text("unconcentrated"))
        .first.is_visible()
    )
    # Two closed months: NRR over one month, and why not over three or twelve
    retention = page.get_by_role("table", name="Revenue retention")
    assert retention.locator("[data-lookback='1']").get_by_text("measured").is_visible()
    for lookback in (3, 12):
        row = retention.locator(f"[data-lookback='{lookback}']")
        assert row.get_by_text("not enough history").first.is_visible()
        assert row.get_by_text("the factory has been in service since").is_visible()
    # The accuracy line beside each forecast, in words
    accuracy = page.locator("[data-forecast='tokens'] [data-accuracy]").inner_text()
    assert accuracy.startswith("Accuracy: Over the last 3 origins this forecast missed by ")
    assert "; a naive forecast by " in accuracy
    # A forecast for the factory, each pool and each model, each with its accuracy
    series = page.get_by_role("table", name="Forecasts")
    scopes = ["factory"] + [p.slug for p in pool_list()]
    scopes += [f"model:{m.slug}" for m in served_model_list()]
    for scope in scopes:
        for metric in ("tokens", "revenue"):
            row = series.locator(f"[data-series='{scope} {metric}']")
            assert row.get_by_text("over the last 3 origins").is_visible()
    assert Forecast.objects.filter(mape__isnull=False).count() == 2 * len(scopes)
    # Read-only: no form posts anything
    assert page.locator("main form[method='post']").count() == 0
    screenshot(page, f"cockpit-{role}")


def test_the_forecast_of_a_model_and_its_chart(demo, page):
    login(page, "investor", "investor-demo")
    page.goto("/cockpit/?scope=model:deepseek-r1")
    page.wait_for_selector("#forecast-chart-revenue .main-svg")
    legend = page.evaluate(
        "() => document.querySelector('#forecast-chart-tokens').data.map(t => t.name)"
    )
    assert {"forecast", "actual (closed days)", "80% band", "95% band"} <= set(legend)
    assert any(
        name and name.endswith("in progress: 15 days closed, 16 forecast") for name in legend
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    chart = page.locator("[data-forecast='tokens']")
    chart.screenshot(path=str(SCREENSHOTS / "cockpit-forecast-chart.png"))
