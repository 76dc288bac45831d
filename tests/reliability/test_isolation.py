"""Tenant isolation and the role matrix, over every API operation and every page route.

Tenant A's member asks for tenant B's objects with a session and with bearer tokens (a
`read` token, and a token forced to carry every scope so the role alone must refuse):
404 for each of B's objects, 403 where the tenant role may not use the operation at all
(the same answer whatever the object, so it tells nothing), lists without any of B's rows.
Cases are keyed by the schema's path templates and the URL resolver's routes: a new
operation or parameterised page without a case fails the coverage tests.

Role matrix: every non-GET operation succeeds for the roles the architecture allows and
is refused, changing nothing, for every other role; investors make no successful
non-GET request, through the API or any page, and exports follow the matrix too.
"""

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from portal.models import ApiToken
from tests.reliability.operations import (
    WRITES,
    Req,
    database_fingerprint,
    refusal_errors,
    schema_operations,
    url,
)
from tests.reliability.world import B_MARKERS, ROLES, World, bearer

pytestmark = pytest.mark.postgres_only  # the fingerprint digests rows with PostgreSQL
MISSING = 987_654_321  # an id no object has
COUNTER = itertools.count(1)  # distinct names and effective dates across requests


@dataclass(frozen=True)
class Reach:
    """Tenant A addresses one object. `status` 404: B's object is invisible (and A's own,
    `own`, answers 200); 403: the tenant role may not use the operation on any object;
    200: a factory-wide object every tenant may read (not tenant data)."""

    status: int
    params: Callable[[World], dict[str, Any]] = lambda w: {}
    own: Callable[[World], dict[str, Any]] | None = None
    missing: dict[str, Any] | None = None
    # The tokens' answer when they lack the operation's scope (`notify`), refused before
    # the object is looked up (None: `status`), and the tokens that lack it.
    scope_status: int | None = None
    scope_lacking: tuple[str, ...] = ("read token", "all-scope token")


@dataclass(frozen=True)
class Listing:
    """A collection: `status` 200 with exactly `own` rows of A and none of B's, or 403.
    `foreign` is a query naming tenant B, answered `foreign_status` (404: every list's
    tenant filter is the same TenantFilter)."""

    status: int
    own: int | None = None
    query: str = ""
    foreign: str | None = None
    foreign_status: int = 404


def _id(name: str) -> Callable[[World], dict[str, Any]]:
    return lambda w: {"id": getattr(w, name).pk}


def _slug(value: str) -> Callable[[World], dict[str, Any]]:
    return lambda w: {"slug": value}


def _tenant(value: str, **more: str) -> Callable[[World], dict[str, Any]]:
    return lambda w: {"tenant": value, **more}


def _id_missing(w: World) -> dict[str, Any]:
    """Factory-wide objects the tenant role may not read at all: any id gets 403."""
    return {"id": MISSING}


MARCH = "from=2026-03-01&to=2026-04-01"
# Writes taking `notify` or `admin` (a tenant's projects): only the read token lacks both.
ADMIN_LACKING = ("read token",)
FORBIDDEN = Reach(403)
FORBIDDEN_LIST = Listing(403)

# (METHOD, path template) → what tenant A gets. Keep in step with the schema.
API_CASES: dict[tuple[str, str], Reach | Listing] = {
    ("GET", "/api/v1/audit/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/capacity"): FORBIDDEN,
    ("GET", "/api/v1/contracts/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/contracts/"): FORBIDDEN,
    ("GET", "/api/v1/contracts/{id}/"): Reach(403, _id("contract_a")),
    ("DELETE", "/api/v1/contracts/{id}/"): Reach(403, _id("contract_b")),
    ("GET", "/api/v1/capacity-plan"): FORBIDDEN_LIST,
    ("POST", "/api/v1/capacity-plan/what-if"): FORBIDDEN,
    ("GET", "/api/v1/cost-models/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/cost-models/"): FORBIDDEN,
    ("GET", "/api/v1/cost-models/{id}/"): Reach(403, _id("cost_model")),
    ("DELETE", "/api/v1/cost-models/{id}/"): Reach(403, _id("cost_model")),
    ("GET", "/api/v1/deployments/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/deployments/"): FORBIDDEN,
    ("GET", "/api/v1/deployments/{slug}/"): Reach(403, _slug("llama-70b@h100-a")),
    ("POST", "/api/v1/deployments/{slug}/versions/"): Reach(403, _slug("llama-70b@h100-a")),
    ("GET", "/api/v1/factory-costs/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/factory-costs/"): FORBIDDEN,
    ("GET", "/api/v1/factory-costs/{id}/"): Reach(403, _id("factory_costs")),
    ("DELETE", "/api/v1/factory-costs/{id}/"): Reach(403, _id("factory_costs")),
    ("GET", "/api/v1/flywheel/cycles/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/flywheel/cycles/"): FORBIDDEN,
    ("GET", "/api/v1/flywheel/cycles/{id}/"): Reach(403, _id_missing),
    ("GET", "/api/v1/flywheel/diagnosis"): FORBIDDEN_LIST,
    ("POST", "/api/v1/flywheel/scenarios"): FORBIDDEN,
    ("GET", "/api/v1/forecast"): FORBIDDEN_LIST,
    ("GET", "/api/v1/goals/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/goals/"): FORBIDDEN,
    ("GET", "/api/v1/goals/{id}/"): Reach(403, _id_missing),
    ("DELETE", "/api/v1/goals/{id}/"): Reach(403, _id_missing),
    ("GET", "/api/v1/incidents/"): Listing(200, own=1, foreign="tenant=tenant-b"),
    ("POST", "/api/v1/incidents/"): FORBIDDEN,
    ("GET", "/api/v1/incidents/{id}/"): Reach(
        404, _id("incident_b"), own=_id("incident_a"), missing={"id": MISSING}
    ),
    ("PATCH", "/api/v1/incidents/{id}/"): Reach(403, _id("incident_b")),
    ("POST", "/api/v1/incidents/{id}/updates/"): Reach(403, _id("incident_b")),
    ("GET", "/api/v1/invoices/"): Listing(200, own=1, foreign="tenant=tenant-b"),
    ("GET", "/api/v1/invoices/{id}/"): Reach(
        404, _id("invoice_b"), own=_id("invoice_a"), missing={"id": MISSING}
    ),
    ("POST", "/api/v1/invoices/{id}/finalize/"): Reach(403, _id("invoice_b")),
    ("POST", "/api/v1/invoices/{id}/pay/"): Reach(403, _id("invoice_b")),
    ("POST", "/api/v1/invoices/{id}/void/"): Reach(403, _id("invoice_b")),
    ("GET", "/api/v1/credit-notes/"): Listing(200, own=1, foreign="tenant=tenant-b"),
    ("POST", "/api/v1/credit-notes/"): FORBIDDEN,
    ("GET", "/api/v1/credit-notes/{id}/"): Reach(
        404, _id("credit_note_b"), own=_id("credit_note_a")
    ),
    ("POST", "/api/v1/close"): FORBIDDEN,
    ("GET", "/api/v1/close/{month}"): Reach(403, lambda w: {"month": "2026-03"}),
    ("GET", "/api/v1/receivables"): FORBIDDEN_LIST,
    ("POST", "/api/v1/prepaid"): FORBIDDEN,
    ("GET", "/api/v1/tenants/{slug}/balances"): Reach(
        404, _slug("tenant-b"), own=_slug("tenant-a")
    ),
    ("GET", "/api/v1/exports/focus"): Reach(200, lambda w: {}),
    ("GET", "/api/v1/kpis"): FORBIDDEN_LIST,
    ("GET", "/api/v1/lever-applications/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/lever-applications/"): FORBIDDEN,
    ("GET", "/api/v1/lever-applications/{id}/"): Reach(403, _id_missing),
    ("DELETE", "/api/v1/lever-applications/{id}/"): Reach(403, _id_missing),
    ("GET", "/api/v1/levers/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/levers/"): FORBIDDEN,
    ("GET", "/api/v1/levers/{id}/"): Reach(403, _id_missing),
    ("DELETE", "/api/v1/levers/{id}/"): Reach(403, _id_missing),
    # A's invoice (3 postings) and its credit note (2).
    ("GET", "/api/v1/ledger/"): Listing(200, own=5, foreign="tenant=tenant-b"),
    ("GET", "/api/v1/maintenance/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/maintenance/"): FORBIDDEN,
    ("GET", "/api/v1/maintenance/{id}/"): Reach(403, _id("maintenance")),
    ("PATCH", "/api/v1/maintenance/{id}/"): Reach(403, _id("maintenance")),
    ("DELETE", "/api/v1/maintenance/{id}/"): Reach(403, _id("maintenance")),
    ("GET", "/api/v1/market"): FORBIDDEN_LIST,
    ("GET", "/api/v1/reference-curves"): FORBIDDEN_LIST,
    ("POST", "/api/v1/reference-curves"): FORBIDDEN,
    ("GET", "/api/v1/models/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/models/"): FORBIDDEN,
    ("GET", "/api/v1/models/{slug}/"): Reach(403, _slug("llama-70b")),
    ("PUT", "/api/v1/models/{slug}/"): Reach(403, _slug("llama-70b")),
    ("PATCH", "/api/v1/models/{slug}/"): Reach(403, _slug("llama-70b")),
    ("DELETE", "/api/v1/models/{slug}/"): Reach(403, _slug("llama-70b")),
    ("GET", "/api/v1/pools/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/pools/"): FORBIDDEN,
    ("GET", "/api/v1/pools/{slug}/"): Reach(403, _slug("h100-a")),
    ("PUT", "/api/v1/pools/{slug}/"): Reach(403, _slug("h100-a")),
    ("PATCH", "/api/v1/pools/{slug}/"): Reach(403, _slug("h100-a")),
    ("DELETE", "/api/v1/pools/{slug}/"): Reach(403, _slug("h100-a")),
    ("GET", "/api/v1/prices/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/prices/"): FORBIDDEN,
    ("GET", "/api/v1/prices/{id}/"): Reach(403, _id("price")),
    ("DELETE", "/api/v1/prices/{id}/"): Reach(403, _id("price")),
    ("GET", "/api/v1/promotions/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/promotions/"): FORBIDDEN,
    ("GET", "/api/v1/promotions/{id}/"): Reach(403, _id("promotion_a")),
    ("DELETE", "/api/v1/promotions/{id}/"): Reach(403, _id("promotion_b")),
    ("GET", "/api/v1/scrape-targets/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/scrape-targets/"): FORBIDDEN,
    ("GET", "/api/v1/scrape-targets/{id}/"): Reach(403, _id("scrape_target")),
    ("PUT", "/api/v1/scrape-targets/{id}/"): Reach(403, _id("scrape_target")),
    ("PATCH", "/api/v1/scrape-targets/{id}/"): Reach(403, _id("scrape_target")),
    ("DELETE", "/api/v1/scrape-targets/{id}/"): Reach(403, _id("scrape_target")),
    ("GET", "/api/v1/sla"): Listing(200, own=1, query=MARCH, foreign=f"{MARCH}&tenant=tenant-b"),
    ("POST", "/api/v1/telemetry/prometheus"): FORBIDDEN,
    ("GET", "/api/v1/tenants/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/tenants/"): FORBIDDEN,
    ("GET", "/api/v1/tenants/{slug}/"): Reach(403, _slug("tenant-a")),
    ("PUT", "/api/v1/tenants/{slug}/"): Reach(403, _slug("tenant-b")),
    ("PATCH", "/api/v1/tenants/{slug}/"): Reach(403, _slug("tenant-b")),
    ("DELETE", "/api/v1/tenants/{slug}/"): Reach(403, _slug("tenant-b")),
    ("GET", "/api/v1/tfom"): FORBIDDEN_LIST,
    ("GET", "/api/v1/usage"): Listing(200, own=1, query=MARCH, foreign=f"{MARCH}&tenant=tenant-b"),
    ("POST", "/api/v1/usage/cloudevents"): FORBIDDEN,
    ("POST", "/api/v1/usage/events"): FORBIDDEN,
    ("POST", "/api/v1/usage/openai-batch"): FORBIDDEN,
    ("GET", "/api/v1/usage/rejections"): FORBIDDEN_LIST,
    ("POST", "/api/v1/otlp/v1/traces"): FORBIDDEN,
    ("POST", "/api/v1/otlp/v1/metrics"): FORBIDDEN,
    ("GET", "/metrics"): FORBIDDEN_LIST,
    # Its own endpoint and B's: the member holds A's (the world's tokens lack `notify`).
    ("GET", "/api/v1/webhook-endpoints/"): Listing(200, own=1),
    ("POST", "/api/v1/webhook-endpoints/"): FORBIDDEN,  # for tenant B
    ("GET", "/api/v1/webhook-endpoints/{id}/"): Reach(
        404, _id("endpoint_b"), own=_id("endpoint_a"), missing={"id": MISSING}
    ),
    ("PUT", "/api/v1/webhook-endpoints/{id}/"): Reach(404, _id("endpoint_b"), scope_status=403),
    ("PATCH", "/api/v1/webhook-endpoints/{id}/"): Reach(404, _id("endpoint_b"), scope_status=403),
    ("DELETE", "/api/v1/webhook-endpoints/{id}/"): Reach(404, _id("endpoint_b"), scope_status=403),
    ("POST", "/api/v1/webhook-endpoints/{id}/rotate/"): Reach(
        404, _id("endpoint_b"), scope_status=403
    ),
    ("GET", "/api/v1/webhook-endpoints/{id}/deliveries/"): Reach(
        404, _id("endpoint_b"), own=_id("endpoint_a")
    ),
    ("POST", "/api/v1/deliveries/{id}/replay"): Reach(404, _id("delivery_b"), scope_status=403),
    # Its own budget rule and its alert, never B's.
    ("GET", "/api/v1/alert-rules/"): Listing(200, own=1),
    ("POST", "/api/v1/alert-rules/"): FORBIDDEN,  # for tenant B
    ("GET", "/api/v1/alert-rules/{id}/"): Reach(404, _id("rule_b"), own=_id("rule_a")),
    ("PUT", "/api/v1/alert-rules/{id}/"): Reach(404, _id("rule_b"), scope_status=403),
    ("PATCH", "/api/v1/alert-rules/{id}/"): Reach(404, _id("rule_b"), scope_status=403),
    ("DELETE", "/api/v1/alert-rules/{id}/"): Reach(404, _id("rule_b"), scope_status=403),
    ("GET", "/api/v1/alerts/"): Listing(200, own=1),
    ("GET", "/api/v1/alerts/{id}/"): Reach(404, _id("alert_b"), own=_id("alert_a")),
    ("GET", "/api/v1/tenants/{slug}/budget"): Reach(404, _slug("tenant-b"), own=_slug("tenant-a")),
    # Its own projects (both tenants hold a `search`) and its own chargeback rows.
    ("GET", "/api/v1/tenants/{tenant}/projects/"): Reach(
        404, _tenant("tenant-b"), own=_tenant("tenant-a")
    ),
    ("POST", "/api/v1/tenants/{tenant}/projects/"): Reach(
        404, _tenant("tenant-b"), scope_status=403, scope_lacking=ADMIN_LACKING
    ),
    ("GET", "/api/v1/tenants/{tenant}/projects/{slug}/"): Reach(
        404, _tenant("tenant-b", slug="search"), own=_tenant("tenant-a", slug="search")
    ),
    ("PATCH", "/api/v1/tenants/{tenant}/projects/{slug}/"): Reach(
        404, _tenant("tenant-b", slug="search"), scope_status=403, scope_lacking=ADMIN_LACKING
    ),
    ("GET", "/api/v1/chargeback"): Listing(
        200, query="month=2026-03", foreign="month=2026-03&tenant=tenant-b"
    ),
    # Its own reservation (both tenants hold one in force now), never B's.
    ("GET", "/api/v1/reservations/"): Listing(200, own=1, foreign="tenant=tenant-b"),
    ("POST", "/api/v1/reservations/"): FORBIDDEN,
    ("GET", "/api/v1/reservations/status/"): Listing(200, own=1, foreign="tenant=tenant-b"),
    ("GET", "/api/v1/reservations/{id}/"): Reach(
        404, _id("reservation_b"), own=_id("reservation_a"), missing={"id": MISSING}
    ),
    ("PATCH", "/api/v1/reservations/{id}/"): Reach(403, _id("reservation_b")),
    ("POST", "/api/v1/reservations/{id}/cancel/"): Reach(403, _id("reservation_b")),
    ("GET", "/api/v1/reservations/{id}/utilization/"): Reach(
        404, _id("reservation_b"), own=_id("reservation_a")
    ),
    ("GET", "/api/v1/service-tiers/"): FORBIDDEN_LIST,
    ("POST", "/api/v1/service-tiers/"): FORBIDDEN,
    ("GET", "/api/v1/service-tiers/{id}/"): Reach(403, _id_missing),
    ("DELETE", "/api/v1/service-tiers/{id}/"): Reach(403, _id_missing),
}


# The tenant-facing reads (architecture.md: usage, SLA, incidents that touched them,
# invoices, their ledger rows): the only operations a tenant member gets a 200 from. Every
# configuration endpoint (tenants, contracts, promotions, maintenance, pools, prices…) is
# the operators' and finance's, own records included.
TENANT_FACING = {
    ("GET", "/api/v1/incidents/"),
    ("GET", "/api/v1/incidents/{id}/"),
    ("GET", "/api/v1/invoices/"),
    ("GET", "/api/v1/invoices/{id}/"),
    ("GET", "/api/v1/credit-notes/"),
    ("GET", "/api/v1/credit-notes/{id}/"),
    ("GET", "/api/v1/tenants/{slug}/balances"),
    ("GET", "/api/v1/exports/focus"),
    ("GET", "/api/v1/ledger/"),
    ("GET", "/api/v1/sla"),
    ("GET", "/api/v1/usage"),
    ("GET", "/api/v1/webhook-endpoints/"),
    ("GET", "/api/v1/webhook-endpoints/{id}/"),
    ("GET", "/api/v1/webhook-endpoints/{id}/deliveries/"),
    ("GET", "/api/v1/alert-rules/"),
    ("GET", "/api/v1/alert-rules/{id}/"),
    ("GET", "/api/v1/alerts/"),
    ("GET", "/api/v1/alerts/{id}/"),
    ("GET", "/api/v1/tenants/{slug}/budget"),
    ("GET", "/api/v1/tenants/{tenant}/projects/"),
    ("GET", "/api/v1/tenants/{tenant}/projects/{slug}/"),
    ("GET", "/api/v1/chargeback"),
    ("GET", "/api/v1/reservations/"),
    ("GET", "/api/v1/reservations/status/"),
    ("GET", "/api/v1/reservations/{id}/"),
    ("GET", "/api/v1/reservations/{id}/utilization/"),
}


@dataclass(frozen=True)
class Page:
    """A page route with URL parameters: tenant A's answer for B's object (`params`), and
    200 for its own (`own`) where a member may open it."""

    method: str
    status: int
    params: Callable[[World], dict[str, Any]]
    own: Callable[[World], dict[str, Any]] | None = None


def _pk(name: str) -> Callable[[World], dict[str, Any]]:
    return lambda w: {"pk": getattr(w, name).pk}


# Route (as the URL resolver spells it) → what tenant A gets.
PAGE_CASES: dict[str, Page] = {
    "inbox/<int:pk>/open/": Page("GET", 404, lambda w: {"pk": w.delivery_b.event_id}),
    "notifications/endpoints/<int:pk>/": Page("GET", 404, _pk("endpoint_b"), own=_pk("endpoint_a")),
    "notifications/deliveries/<int:pk>/replay/": Page("POST", 404, _pk("delivery_b")),
    "alerts/rules/<int:pk>/": Page("POST", 404, _pk("rule_b")),
    "tokens/<int:pk>/revoke/": Page("POST", 404, _pk("token_b")),
    "incidents/<int:pk>/": Page("GET", 403, _pk("incident_b")),  # operators only
    "incidents/<int:pk>/updates/": Page("POST", 403, _pk("incident_b")),
    "incidents/maintenance/<int:pk>/cancel/": Page("POST", 403, _pk("maintenance")),
    "billing/invoices/<int:pk>/": Page("GET", 404, _pk("invoice_b"), own=_pk("invoice_a")),
    "billing/invoices/<int:pk>/pdf/": Page("GET", 404, _pk("invoice_b"), own=_pk("invoice_a")),
    "billing/invoices/<int:pk>/csv/": Page("GET", 404, _pk("invoice_b"), own=_pk("invoice_a")),
    "billing/invoices/<int:pk>/pay/": Page("POST", 403, _pk("invoice_b")),
    "billing/invoices/<int:pk>/void/": Page("POST", 403, _pk("invoice_b")),
    "billing/invoices/<int:pk>/credit/": Page("POST", 403, _pk("invoice_b")),
    "billing/credit-notes/<int:pk>/": Page(
        "GET", 404, _pk("credit_note_b"), own=_pk("credit_note_a")
    ),
    "billing/credit-notes/<int:pk>/pdf/": Page(
        "GET", 404, _pk("credit_note_b"), own=_pk("credit_note_a")
    ),
    "billing/credit-notes/<int:pk>/csv/": Page(
        "GET", 404, _pk("credit_note_b"), own=_pk("credit_note_a")
    ),
    "billing/close/<str:month>/": Page("GET", 403, lambda w: {"month": "2026-03"}),
    "billing/reservations/<int:pk>/": Page(
        "GET", 404, _pk("reservation_b"), own=_pk("reservation_a")
    ),
    "billing/close/<str:month>/pdf/": Page("GET", 403, lambda w: {"month": "2026-03"}),
}

# Pages and exports a member may open, plain and filtered by tenant B: none of B's data, and
# A's own figures exactly (a page summing both tenants would show neither).
MEMBER_PAGES: dict[str, tuple[str, ...]] = {
    "/": (),
    "/tokens/": (),
    "/usage/?preset=custom&from=2026-03-01&to=2026-04-01": ("3,000,003", "3000003"),
    "/usage/?from=2026-03-01&to=2026-04-01&format=csv": ("3000003",),
    "/billing/invoices/": ("INV-",),
    "/billing/invoices/?format=csv": ("INV-",),
    "/billing/sla/?month=2026-03": (),
    "/status/": (),
}


# List pages and exports a member may open: filtered by tenant B they answer 404, as every
# API list does, and filtered by tenant A they answer as usual.
MEMBER_LIST_PAGES = (
    "/usage/",
    "/usage/?format=csv",
    "/billing/invoices/",
    "/billing/invoices/?format=csv",
    "/billing/sla/",
)


def _routes(resolver=None, prefix=""):
    for pattern in (resolver or get_resolver()).url_patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern)


def _page_url(route: str, params: dict[str, Any]) -> str:
    path = "/" + route
    for name, value in params.items():
        for spelled in (f"<int:{name}>", f"<str:{name}>", f"<{name}>"):
            path = path.replace(spelled, str(value))
    assert "<" not in path, path
    return path


def _clients(user) -> dict[str, APIClient]:
    """A session, a `read` token, and a token forced to carry every scope."""
    session = APIClient()
    session.force_login(user)
    clients = {"session": session}
    for name, scopes in (
        ("read token", ["read"]),
        ("all-scope token", ["read", "ingest", "admin"]),
    ):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {bearer(user, scopes)}")
        clients[name] = client
    return clients


def _send(client, method: str, path: str, req: Req | None = None):
    req = req or Req()
    return client.generic(method, path, req.payload(), content_type=req.content_type)


def _leaks(response, *, echoed: tuple[str, ...] = ()) -> list[str]:
    """B's markers in a response; `echoed` ones are left out (the request named them)."""
    text = response.content.decode("utf-8", "replace").lower()
    return [m for m in B_MARKERS if m.lower() in text and m not in echoed]


def _rows(response) -> list[dict]:
    data = response.json()
    return data["results"] if isinstance(data, dict) and "results" in data else data


@pytest.fixture
def world(world):
    world.clients = _clients(world.users["tenant"])
    return world


def test_every_schema_operation_has_a_tenant_case():
    """A new API operation fails here until API_CASES says what tenant A gets from it."""
    assert set(API_CASES) == schema_operations()


def test_every_parameterised_page_route_has_a_tenant_case():
    """A new page route with URL parameters fails here until PAGE_CASES covers it."""
    # The admin's routes: every one refused to members and investors (tests/portal/test_admin.py).
    routes = {r for r in _routes() if "<" in r and not r.startswith(("api/", "admin/"))}
    assert routes == set(PAGE_CASES)


@pytest.mark.parametrize(
    ("method", "path"), sorted(API_CASES), ids=[f"{m} {p}" for m, p in sorted(API_CASES)]
)
def test_tenant_a_cannot_reach_tenant_b_through_the_api(world, method, path):
    case = API_CASES[(method, path)]
    for name, client in world.clients.items():
        where = f"{method} {path} ({name})"
        if isinstance(case, Listing):
            response = _send(client, method, path + (f"?{case.query}" if case.query else ""))
            assert response.status_code == case.status, (where, response.content[:300])
            if case.status != 200:
                continue
            assert not _leaks(response), (where, _leaks(response))
            if case.own is not None:
                assert len(_rows(response)) == case.own, (where, response.json())
            if case.foreign:
                response = _send(client, method, f"{path}?{case.foreign}")
                assert response.status_code == case.foreign_status, (where, case.foreign)
                if response.status_code == 200:
                    assert _rows(response) == [], (where, case.foreign)
            continue
        req = Req(params=case.params(world))
        if method != "GET":
            write = WRITES[(method, path)].make(world, next(COUNTER))
            body = write.body
            if isinstance(body, dict) and "tenant" in body:
                body = {**body, "tenant": "tenant-b"}
            req = Req(params=case.params(world), body=body, content_type=write.content_type)
            before = database_fingerprint()
        response = _send(client, method, req.path(path), req)
        expected = case.status
        if case.scope_status is not None and name in case.scope_lacking:
            expected = case.scope_status
        assert response.status_code == expected, (where, response.content[:300])
        if response.status_code == 200:
            assert not _leaks(response), (where, _leaks(response))
        if method != "GET":
            assert database_fingerprint() == before, where
        if case.missing is not None:
            absent = _send(client, method, url(path, case.missing))
            assert absent.status_code == case.status, (where, "missing object")
        if case.own is not None:
            own = _send(client, method, url(path, case.own(world)))
            assert own.status_code == 200, (where, "own object", own.content[:300])


def test_tenant_member_gets_200_only_from_the_tenant_facing_reads(world):
    """Every operation of the schema, with the member's session, read token and all-scope
    token, on the member's own object where it has one: 200 exactly for TENANT_FACING."""
    answered: dict[str, set[tuple[str, str]]] = {name: set() for name in world.clients}
    for (method, path), case in sorted(API_CASES.items()):
        if method != "GET":
            continue  # writes: test_tenant_a_cannot_reach_tenant_b_through_the_api (403)
        if isinstance(case, Listing):
            target = path + (f"?{case.query}" if case.query else "")
        else:
            target = url(path, (case.own or case.params)(world))
        for name, client in world.clients.items():
            response = _send(client, method, target)
            assert response.status_code in (200, 403), (name, target, response.content[:300])
            if response.status_code == 200:
                answered[name].add((method, path))
    assert answered == dict.fromkeys(world.clients, TENANT_FACING)


@pytest.mark.parametrize("path", MEMBER_LIST_PAGES)
def test_member_list_pages_filtered_by_another_tenant_are_404(world, path):
    client = world.clients["session"]
    joiner = "&" if "?" in path else "?"

    assert client.get(f"{path}{joiner}tenant=tenant-b").status_code == 404
    assert client.get(f"{path}{joiner}tenant=nobody").status_code == 404
    assert client.get(f"{path}{joiner}tenant=tenant-a").status_code == 200


@pytest.mark.parametrize("route", sorted(PAGE_CASES))
def test_tenant_a_cannot_reach_tenant_b_through_pages(world, route):
    case = PAGE_CASES[route]
    client = world.clients["session"]
    before = database_fingerprint()
    response = client.generic(case.method, _page_url(route, case.params(world)))
    assert response.status_code == case.status, (route, response.status_code)
    assert database_fingerprint() == before
    if case.status == 404:
        missing = client.generic(case.method, _page_url(route, {"pk": MISSING}))
        assert missing.status_code == 404
    if case.own is not None:
        own = client.generic(case.method, _page_url(route, case.own(world)))
        assert own.status_code == 200
        assert not _leaks(own)
    if route.startswith("tokens/"):
        assert ApiToken.objects.get(pk=world.token_b.pk).revoked_at is None


@pytest.mark.parametrize("page", sorted(MEMBER_PAGES))
def test_member_pages_and_exports_show_none_of_tenant_b(world, page):
    client = world.clients["session"]
    own = client.get(page)
    assert own.status_code == 200
    assert not _leaks(own), (page, _leaks(own))
    text = own.content.decode()
    if MEMBER_PAGES[page]:
        assert any(figure in text for figure in MEMBER_PAGES[page]), page
    assert world.invoice_b.number not in text
    filtered = page + ("&" if "?" in page else "?") + "tenant=tenant-b"
    response = client.get(filtered)
    assert response.status_code in (200, 404), (filtered, response.status_code)
    if response.status_code == 200:
        # Links on the page repeat the query, so the slug itself may appear; B's data may not.
        assert not _leaks(response, echoed=("tenant-b",)), (filtered, _leaks(response))
        assert world.invoice_b.number not in response.content.decode()


# --- Role matrix ----------------------------------------------------------------------


def test_every_write_operation_has_a_role_case():
    """A new non-GET operation fails here until WRITES says who may do it."""
    assert set(WRITES) == {op for op in schema_operations() if op[0] != "GET"}


@pytest.mark.parametrize(
    ("method", "path"), sorted(WRITES), ids=[f"{m} {p}" for m, p in sorted(WRITES)]
)
def test_write_succeeds_for_allowed_roles_only(world, method, path):
    write = WRITES[(method, path)]
    for role in ROLES:
        req = write.make(world, next(COUNTER))
        target = req.path(path)
        session = APIClient()
        session.force_login(world.users[role])
        if role in write.roles:
            response = _send(session, method, target, req)
            assert response.status_code < 300, (role, response.content[:500])
            continue
        token = APIClient()
        token.credentials(
            HTTP_AUTHORIZATION=f"Bearer {bearer(world.users[role], ['read', 'ingest', 'admin'])}"
        )
        before = database_fingerprint()
        for name, client in (("session", session), ("all-scope token", token)):
            response = _send(client, method, target, req)
            assert response.status_code == 403, (role, name, response.content[:300])
            assert refusal_errors(response)[0]["message"]
        assert database_fingerprint() == before, role


def _page_routes_with_params(world: World) -> list[str]:
    paths = []
    for route in _routes():
        if route.startswith(("api/", "admin/")) or route == "metrics":
            continue
        params = PAGE_CASES[route].params(world) if route in PAGE_CASES else {}
        paths.append(_page_url(route, params))
    return paths


def test_investor_makes_no_successful_post_to_any_page(world):
    """Every page route, POSTed by an investor (the forms' CSRF aside): refused, nothing
    changed. Sign-in and sign-out are the exceptions the architecture names."""
    client = APIClient()
    client.force_login(world.users["investor"])
    before = database_fingerprint()
    answers = {}
    for path in _page_routes_with_params(world):
        if path in ("/login/", "/logout/"):
            continue
        answers[path] = client.post(path, {"name": "x", "scopes": ["read"]}).status_code
    accepted = {p: s for p, s in answers.items() if s not in (403, 405)}
    assert accepted == {}
    assert database_fingerprint() == before


@dataclass(frozen=True)
class Export:
    path: Callable[[World], str]
    roles: frozenset[str]
    content_type: str
    tenant_status: int = 403
    extra: dict = field(default_factory=dict)


EXPORTS = {
    "usage csv": Export(
        lambda w: "/usage/?from=2026-03-01&to=2026-04-01&format=csv",
        frozenset({"operator", "finance", "tenant"}),
        "text/csv",
    ),
    "invoices csv": Export(
        lambda w: "/billing/invoices/?format=csv",
        frozenset({"operator", "finance", "tenant"}),
        "text/csv",
    ),
    "own invoice csv": Export(
        lambda w: f"/billing/invoices/{w.invoice_a.pk}/csv/",
        frozenset({"operator", "finance", "tenant"}),
        "text/csv",
    ),
    "own invoice pdf": Export(
        lambda w: f"/billing/invoices/{w.invoice_a.pk}/pdf/",
        frozenset({"operator", "finance", "tenant"}),
        "application/pdf",
    ),
    "ledger csv": Export(
        lambda w: "/billing/ledger/?format=csv", frozenset({"operator", "finance"}), "text/csv"
    ),
    "tfom csv": Export(
        lambda w: "/reports/tfom/?period=2026-03&format=csv",
        frozenset({"operator", "finance", "investor"}),
        "text/csv",
    ),
    "tfom xlsx": Export(
        lambda w: "/reports/tfom/?period=2026-03&format=xlsx",
        frozenset({"operator", "finance", "investor"}),
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
}


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_exports_follow_the_role_matrix(world, name):
    export = EXPORTS[name]
    for role in ROLES:
        client = APIClient()
        client.force_login(world.users[role])
        response = client.get(export.path(world))
        if role in export.roles:
            assert response.status_code == 200, (role, response.status_code)
            assert response["Content-Type"].startswith(export.content_type), role
            assert not _leaks(response) or role != "tenant"
        else:
            assert response.status_code == 403, (role, response.status_code)


def test_api_docs_schema_is_the_one_the_cases_cover(world):
    """/api/schema/ serves each reader the operations their role may call: the member
    exactly the tenant-facing reads and the writes its role may do (its own webhook
    endpoints); every role together, every operation the cases cover."""

    def served(client) -> set[tuple[str, str]]:
        document = json.loads(client.get("/api/schema/?format=json").content)
        return {
            (method.upper(), path)
            for path, item in document["paths"].items()
            for method in item
            if method in ("get", "post", "put", "patch", "delete")
        }

    member_writes = {op for op, write in WRITES.items() if "tenant" in write.roles}
    assert served(world.clients["session"]) == TENANT_FACING | member_writes
    every = set()
    for role in ROLES:
        client = APIClient()
        client.force_login(world.users[role])
        every |= served(client)
    assert every == schema_operations()
