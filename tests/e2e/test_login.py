import pytest

from tests.conftest import PASSWORD
from tests.e2e.conftest import login, screenshot

HOME_HEADINGS = {
    "operator": "Factory overview",
    "finance": "Finance home",  # its books first, then the factory
    "investor": "Factory overview",
    "tenant": "Tenant A",
}


@pytest.mark.e2e
@pytest.mark.parametrize("role", sorted(HOME_HEADINGS))
def test_each_role_logs_in_and_sees_its_home(role, users, page):
    login(page, users[role].username, PASSWORD)

    assert page.url.endswith("/")
    assert page.get_by_role("heading", level=1).inner_text() == HOME_HEADINGS[role]
    nav = page.get_by_role("navigation", name="Main").inner_text()
    assert ("Audit log" in nav) is (role == "operator")
    assert ("API tokens" in nav) is (role != "investor")
    assert ("SLA" in nav.split()) is (role != "investor")
    screenshot(page, f"home-{role}")


@pytest.mark.e2e
def test_wrong_password_shows_an_error_and_stays_on_login(users, page):
    login(page, users["operator"].username, "wrong")

    assert "/login/" in page.url
    assert page.get_by_role("alert").is_visible()


@pytest.mark.e2e
def test_signing_in_requests_nothing_that_fails(users, page):
    """The browser asks for nothing the portal does not serve: no 404 for its icon (each
    page names it) or anything else on the way in."""
    failed = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)

    login(page, users["operator"].username, PASSWORD)

    assert page.url.endswith("/")
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon.endswith("/img/favicon.svg")
    assert page.request.get(icon).status == 200
    assert failed == []
