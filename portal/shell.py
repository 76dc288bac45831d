"""The shell: the left navigation and each role's home. The kernel holds its own entries
(Home, and the Account section: inbox, alerts, notifications, tokens, audit, API docs); the
apps register theirs from AppConfig.ready (`pages_register`, `home_register`), so the
kernel names no app's page. Who may open a page is read from its view's `role_required`,
so it is written once."""

from dataclasses import dataclass
from functools import cache

from django.conf import settings
from django.urls import NoReverseMatch, Resolver404, get_urlconf, resolve, reverse
from django.utils.module_loading import import_string

from portal.models import Role

ALL = frozenset(Role)


@dataclass(frozen=True)
class NavItem:
    label: str
    url_name: str
    section: str = ""  # the heading it is listed under; entries of one section are adjacent


HOME = NavItem("Home", "home")
ACCOUNT = (
    NavItem("Inbox", "inbox", "Account"),
    NavItem("Alerts", "alerts", "Account"),
    NavItem("Notifications", "notifications", "Account"),
    NavItem("API tokens", "tokens", "Account"),
    NavItem("Audit log", "audit", "Account"),
    NavItem("API docs", "api-docs", "Account"),
)
_pages: list[NavItem] = []
_homes: dict[Role, str] = {}


def pages_register(*items: NavItem) -> None:
    """An app's pages in the navigation, listed after those registered before them (the
    apps register in INSTALLED_APPS order), between Home and the Account section."""
    _pages.extend(item for item in items if item not in _pages)


def nav_items() -> list[NavItem]:
    """Every entry, in order: Home, the apps' pages, the Account section."""
    return [HOME, *_pages, *ACCOUNT]


def home_register(role: Role, view: str) -> None:
    """The landing page of `role`: a view's dotted path, imported when it is first shown
    (a role no app registers gets a welcome page)."""
    _homes[role] = view


def home_view(role: Role):
    """The view registered as `role`'s landing page, or None."""
    path = _homes.get(role)
    return None if path is None else import_string(path)


def nav_for(role: Role | None, current_path: str = "") -> list[dict]:
    """The entries a role may open, in order, with their URL and whether they are current."""
    items = []
    for item in nav_items():
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


def page_opens(link: str, role: Role | None) -> bool:
    """Whether a link of the portal's (a path, with its query or fragment) opens for `role`:
    a page whose view admits the role, never one that would answer it 403 or 404 (an
    alert's evidence on a page of the operators', shown to finance)."""
    path = link.split("#", 1)[0].split("?", 1)[0]
    if not path.startswith("/"):
        return False
    try:
        match = resolve(path, urlconf=get_urlconf() or settings.ROOT_URLCONF)
    except Resolver404:
        return False
    return role in getattr(match.func, "portal_roles", ALL)
