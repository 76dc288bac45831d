import re

import pytest

from tests.e2e.conftest import chart_points, login, screenshot

pytestmark = pytest.mark.e2e


def _percent(text: str) -> float:
    return float(re.sub(r"[^0-9.]", "", text)) / 100


def test_operator_front_page_shows_the_factor_chain(demo, page):
    login(page, "operator", "operator-demo")
    page.goto("/")
    page.wait_for_selector("#waterfall-chart .main-svg")

    bars = page.evaluate("() => document.querySelector('#waterfall-chart').data[0].x.length")
    assert bars == 9  # calendar, α, β, η, TEF, σ, s, ρ, TFI
    factors = page.get_by_role("table", name="Factors")
    value = {}
    for row in factors.get_by_role("row").all()[1:]:
        cells = row.get_by_role("cell").all_inner_texts()
        value[cells[0]] = _percent(cells[1])
    product = 1.0
    for name in ("α availability", "β occupancy", "η efficiency", "σ SLA delivery",
                 "s sell-through", "ρ price realization"):  # fmt: skip
        product *= value[name]
    assert product == pytest.approx(value["TFI = TEF·σ·s·ρ"], abs=0.0015)  # shown to 0.1%
    assert 0.15 < value["TFI = TEF·σ·s·ρ"] < 0.25  # the demo is weak at selling

    pools = page.get_by_role("table", name="Pools").get_by_role("row")
    assert pools.count() == 1 + 3
    for chart in ("#trend-chart", "#tps-chart"):
        page.wait_for_selector(f"{chart} .main-svg")
        assert chart_points(page, chart) >= 2 * 29  # two series over the 29 closed days of the demo
    screenshot(page, "overview-operator")


def test_investor_lands_on_the_overview_too(demo, page):
    login(page, "investor", "investor-demo")
    page.goto("/")
    page.wait_for_selector("#waterfall-chart .main-svg")
    assert page.get_by_role("heading", name="Factory overview").is_visible()
