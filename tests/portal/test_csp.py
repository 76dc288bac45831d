"""Content-Security-Policy: self only, on every response, and pages that keep to it (no
inline script or style; Plotly charts still draw)."""

import os
import re
from pathlib import Path

import pytest
from django.test import Client

from metering.models import DailyUsage
from portal import clock
from tests.metering.factories import make_deployment

# Playwright's sync API runs an event loop in this thread; the fixtures' ORM calls are
# synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "font-src 'self'; connect-src 'self'; frame-ancestors 'none'; object-src 'none'; "
    "base-uri 'self'; form-action 'self'"
)
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
# Rendered into PDFs by WeasyPrint, never served to a browser.
PDF_DOCUMENTS = {"invoice_document.html", "tfom_report_document.html"}
INLINE = re.compile(
    r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>|<style\b|\sstyle=|\son[a-z]+=",
    re.IGNORECASE,
)


def test_a_page_carries_the_policy(client, db):
    response = client.get("/login/")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == POLICY


def test_an_api_response_carries_the_policy(users, token_client):
    response = token_client(users["operator"]).get("/api/v1/pools")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == POLICY


def test_error_pages_carry_the_policy(client, users):
    client.force_login(users["tenant"])
    missing = client.get("/no-such-page/")
    refused = client.get("/audit/")
    assert (missing.status_code, refused.status_code) == (404, 403)
    assert missing["Content-Security-Policy"] == POLICY
    assert refused["Content-Security-Policy"] == POLICY


def test_a_server_error_page_carries_the_policy(db, monkeypatch):
    from metering.views import sla

    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(sla, "status_overview", broken)
    response = Client(raise_request_exception=False).get("/status/")
    assert response.status_code == 500
    assert response["Content-Security-Policy"] == POLICY


def test_templates_hold_no_inline_script_or_style():
    found = [
        f"{path.relative_to(TEMPLATES)}:{n}: {match.group(0).strip()}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        if path.name not in PDF_DOCUMENTS
        for n, line in enumerate(path.read_text().splitlines(), 1)
        for match in INLINE.finditer(line)
    ]
    assert found == []


# ---------------------------------------------------------------- in the browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""


@pytest.fixture
def browser_page(live_server):
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/ensure-system-packages.sh")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        context = browser.new_context(base_url=live_server.url)
        context.add_init_script(RECORD_VIOLATIONS)
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.console_messages = []
        page.on("console", lambda m: page.console_messages.append(m.text))
        yield page
        browser.close()


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
