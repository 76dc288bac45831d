"""Pages keep to the Content-Security-Policy in the browser: no violation, and Plotly
charts and the API docs still draw (the header itself: tests/portal/test_csp.py)."""

import pytest
from django.test import Client

from metering.models import DailyUsage
from portal import clock
from tests.metering.factories import make_deployment
from tests.portal.test_csp import POLICY

pytestmark = pytest.mark.e2e

RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""


@pytest.fixture
def browser_page(browser, live_server):
    context = browser.new_context(base_url=live_server.url)
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.console_messages = []
    page.on("console", lambda m: page.console_messages.append(m.text))
    yield page
    context.close()


def _sign_in(page, user, live_server):
    client = Client()
    client.force_login(user)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )


def _violations(page) -> list[str]:
    return page.evaluate("() => window.__csp") + [
        m for m in page.console_messages if "Content Security Policy" in m
    ]


@pytest.mark.e2e
def test_a_chart_page_draws_its_charts_without_a_policy_violation(
    browser_page, live_server, transactional_db, make_user, tenant_a
):
    deployment = make_deployment(model="llama-70b", pool="h100-a")
    DailyUsage.objects.create(
        tenant=tenant_a,
        deployment=deployment,
        day=clock.now().date().replace(day=1),
        requests=10,
        input_tokens=1_000,
        output_tokens=2_000,
        ok_output_tokens=2_000,
    )
    _sign_in(browser_page, make_user("operator"), live_server)

    response = browser_page.goto("/usage/")
    assert response.headers["content-security-policy"] == POLICY
    browser_page.wait_for_selector("#usage-chart .main-svg")
    browser_page.goto("/billing/sla/")
    # the tenant picker submits on change (its handler is in static/, not inline)
    browser_page.get_by_label("Tenant").select_option("tenant-a")
    browser_page.wait_for_selector("#sla-chart .main-svg")

    assert browser_page.url.endswith("/billing/sla/?tenant=tenant-a&month=2026-12")
    assert browser_page.locator("#sla-chart svg.main-svg path").count() > 0
    assert browser_page.evaluate("() => document.querySelector('#sla-chart').data.length") > 0
    assert (found := _violations(browser_page)) == [], "\n".join(found)


@pytest.mark.e2e
def test_status_and_api_docs_pages_keep_to_the_policy(
    browser_page, live_server, transactional_db, make_user
):
    response = browser_page.goto("/status/")
    assert response.headers["content-security-policy"] == POLICY
    browser_page.wait_for_load_state("networkidle")
    _sign_in(browser_page, make_user("operator"), live_server)
    docs = browser_page.goto("/api/docs/")
    # Swagger UI's stylesheet draws its icons as data: images: that page alone allows them
    assert docs.headers["content-security-policy"] == POLICY.replace(
        "img-src 'self'", "img-src 'self' data:"
    )
    browser_page.wait_for_selector(".swagger-ui .opblock")
    assert (found := _violations(browser_page)) == [], "\n".join(found)
