"""The left navigation: the pages in order, each shown to the roles its view admits (read
from the view's `role_required`, so who may open a page is written once)."""

from dataclasses import dataclass
from functools import cache

from django.conf import settings
from django.urls import NoReverseMatch, get_urlconf, resolve, reverse

from portal.models import Role

ALL = frozenset(Role)


@dataclass(frozen=True)
class NavItem:
    label: str
    url_name: str
    section: str = ""


NAV: list[NavItem] = [
    NavItem("Home", "home"),
    NavItem("Usage", "usage", "Factory"),
    NavItem("Metering", "metering", "Factory"),
    NavItem("Incidents", "incidents", "Factory"),
    NavItem("SLA", "sla-page", "Factory"),
    NavItem("Invoices", "invoices", "Billing"),
    NavItem("Credit notes", "credit-notes-page", "Billing"),
    NavItem("Month-end close", "close-page", "Billing"),
    NavItem("Receivables", "receivables-page", "Billing"),
    NavItem("Balances", "balances-page", "Billing"),
    NavItem("Ledger", "ledger", "Billing"),
    NavItem("Price realization", "realization", "Billing"),
    NavItem("Price book", "price-book", "Billing"),
    NavItem("Flywheel", "flywheel", "Economics"),
    NavItem("Investor view", "investor", "Economics"),
    NavItem("TFOM reports", "tfom-reports", "Economics"),
    NavItem("Inbox", "inbox", "Account"),
    NavItem("Alerts", "alerts", "Account"),
    NavItem("Notifications", "notifications", "Account"),
    NavItem("API tokens", "tokens", "Account"),
    NavItem("Audit log", "audit", "Account"),
    NavItem("API docs", "api-docs", "Account"),
]


def nav_for(role: Role | None, current_path: str = "") -> list[dict]:
    """The entries a role may open, in order, with their URL and whether they are current."""
    items = []
    for item in NAV:
        page = _page(get_urlconf() or settings.ROOT_URLCONF, item.url_name)
        if page is None or role not in page[1]:
            continue  # not mounted, or not for this role
        url = page[0]
        active = current_path == url or (url != "/" and current_path.startswith(url))
        items.append(
            {
                "label": item.label,
                "url_name": item.url_name,
                "url": url,
                "section": item.section,
                "active": active,
            }
        )
    return items


@cache
def _page(urlconf: str, url_name: str) -> tuple[str, frozenset[Role]] | None:
    """A named page's URL and the roles its view admits (`role_required`; a view without it,
    every signed-in role), or None when no page has that name (an app not mounted)."""
    try:
        url = reverse(url_name, urlconf=urlconf)
    except NoReverseMatch:
        return None
    return url, getattr(resolve(url, urlconf=urlconf).func, "portal_roles", ALL)
