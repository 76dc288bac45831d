"""The left navigation: each entry names the roles that may open it (and so see it)."""

from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse

from portal.models import Role

ALL = frozenset(Role)
STAFF = frozenset({Role.OPERATOR, Role.FINANCE, Role.INVESTOR})


@dataclass(frozen=True)
class NavItem:
    label: str
    url_name: str
    roles: frozenset[Role]
    section: str = ""


NAV: list[NavItem] = [
    NavItem("Home", "home", ALL),
    NavItem("Usage", "usage", frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}), "Factory"),
    NavItem("Metering", "metering", frozenset({Role.OPERATOR}), "Factory"),
    NavItem("Incidents", "incidents", frozenset({Role.OPERATOR}), "Factory"),
    NavItem("SLA", "sla-page", frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}), "Factory"),
    NavItem(
        "Invoices", "invoices", frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}), "Billing"
    ),
    NavItem(
        "Credit notes",
        "credit-notes-page",
        frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}),
        "Billing",
    ),
    NavItem("Month-end close", "close-page", frozenset({Role.OPERATOR, Role.FINANCE}), "Billing"),
    NavItem("Receivables", "receivables-page", frozenset({Role.OPERATOR, Role.FINANCE}), "Billing"),
    NavItem(
        "Balances",
        "balances-page",
        frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}),
        "Billing",
    ),
    NavItem("Ledger", "ledger", frozenset({Role.OPERATOR, Role.FINANCE}), "Billing"),
    NavItem(
        "Price realization", "realization", frozenset({Role.OPERATOR, Role.FINANCE}), "Billing"
    ),
    NavItem("Price book", "price-book", frozenset({Role.OPERATOR, Role.FINANCE}), "Billing"),
    NavItem("Flywheel", "flywheel", STAFF, "Economics"),
    NavItem("Investor view", "investor", STAFF, "Economics"),
    NavItem("TFOM reports", "tfom-reports", STAFF, "Economics"),
    NavItem("Inbox", "inbox", frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}), "Account"),
    NavItem("Alerts", "alerts", frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}), "Account"),
    NavItem(
        "Notifications",
        "notifications",
        frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}),
        "Account",
    ),
    NavItem(
        "API tokens", "tokens", frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}), "Account"
    ),
    NavItem("Audit log", "audit", frozenset({Role.OPERATOR}), "Account"),
    NavItem("API docs", "api-docs", ALL, "Account"),
]


def nav_for(role: Role | None, current_path: str = "") -> list[dict]:
    """The entries a role may open, in order, with their URL and whether they are current."""
    items = []
    for item in NAV:
        if role is None or role not in item.roles:
            continue
        try:
            url = reverse(item.url_name)
        except NoReverseMatch:
            continue  # an app whose pages are not mounted yet
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


def may_open(role: Role | None, url_name: str) -> bool:
    return any(item.url_name == url_name and role in item.roles for item in NAV)
