"""Role × page matrix, API scopes and token storage."""

import hashlib

import pytest
from django.db import connection
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from portal.models import ApiToken, AuditEntry, Tenant

ROLES = ["operator", "finance", "investor", "tenant"]
# The rows of architecture.md's role matrix that most pages and lists follow:
FACTORY_READ = {"operator", "finance", "investor"}  # factory-wide KPIs, TFOM, flywheel
TENANT_DATA = {"operator", "finance", "tenant"}  # usage, SLA, invoices: a tenant its own
CONFIGURATION = {"operator", "finance"}  # never a tenant's, nor an investor's

# Every page without URL arguments and the roles that may open it.
PAGES = {
    "/": set(ROLES),
    "/tokens/": {"operator", "finance", "tenant"},  # their own tokens; an investor has none
    "/inbox/": {"operator", "finance", "tenant"},  # the events each may see
    "/notifications/": {"operator", "finance", "tenant"},  # endpoints and email opt-ins
    "/alerts/": {"operator", "finance", "tenant"},  # the alerts of the rules each may see
    "/audit/": {"operator"},
    "/usage/": TENANT_DATA,
    "/metering/": {"operator"},
    "/incidents/": {"operator"},
    "/incidents/maintenance/": {"operator"},
    "/incidents/history/": TENANT_DATA,  # a tenant: those that touched it
    "/billing/invoices/": TENANT_DATA,
    "/billing/ledger/": {"operator", "finance"},
    "/billing/close/": {"operator", "finance"},
    "/billing/receivables/": {"operator", "finance"},
    "/billing/credit-notes/": TENANT_DATA,
    "/billing/balances/": TENANT_DATA,
    "/billing/realization/": {"operator", "finance"},
    "/billing/prices/": CONFIGURATION,
    "/billing/reservations/": TENANT_DATA,  # a tenant its own
    "/billing/sla/": TENANT_DATA,
    "/flywheel/": FACTORY_READ,
    "/investor/": FACTORY_READ,
    "/reports/tfom/": FACTORY_READ,
    "/cockpit/": FACTORY_READ,
    "/projects/": TENANT_DATA,  # a tenant: its own projects and chargeback
    "/capacity-plan/": FACTORY_READ,
    "/api/docs/": set(ROLES),
}

# Pages anyone may open, signed in or not.
PUBLIC_PAGES = {"/status/"}

# Every API collection and the roles that may list it.
API_LISTS = {
    "/api/v1/tenants": CONFIGURATION,
    "/api/v1/audit": {"operator"},
    "/api/v1/usage": TENANT_DATA,
    "/api/v1/usage/rejections": {"operator"},  # the ingestion debugger
    "/api/v1/pools": FACTORY_READ,
    "/api/v1/models": FACTORY_READ,
    "/api/v1/deployments": FACTORY_READ,
    "/api/v1/scrape-targets": CONFIGURATION,
    "/api/v1/incidents": TENANT_DATA,
    "/api/v1/maintenance": CONFIGURATION,
    "/api/v1/prices": FACTORY_READ,
    "/api/v1/contracts": CONFIGURATION,
    "/api/v1/promotions": CONFIGURATION,
    "/api/v1/reservations": TENANT_DATA,  # investors: aggregates only (the KPIs)
    "/api/v1/service-tiers": FACTORY_READ,
    "/api/v1/invoices": TENANT_DATA,
    "/api/v1/ledger": TENANT_DATA,
    "/api/v1/credit-notes": TENANT_DATA,
    "/api/v1/receivables": {"operator", "finance"},
    "/api/v1/sla": TENANT_DATA,
    "/api/v1/cost-models": FACTORY_READ,
    "/api/v1/factory-costs": FACTORY_READ,
    "/api/v1/tfom": FACTORY_READ,
    "/api/v1/levers": FACTORY_READ,
    "/api/v1/goals": FACTORY_READ,
    "/api/v1/lever-applications": FACTORY_READ,
    "/api/v1/flywheel/cycles": FACTORY_READ,
    "/api/v1/flywheel/diagnosis": FACTORY_READ,
    "/api/v1/kpis": FACTORY_READ,
    "/api/v1/chargeback": TENANT_DATA,
    "/metrics": FACTORY_READ,
}


def _named_routes(resolver=None, prefix=""):
    resolver = resolver or get_resolver()
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            yield from _named_routes(pattern, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern


def test_matrix_covers_every_page_route():
    """A new page without a row in the matrix fails here."""
    known_prefixes = (
        "api/v1/",
        "api/schema/",
        "login/",
        "logout/",
        "tokens/<int:pk>/revoke/",
        "metrics",  # an API endpoint (Prometheus text), in API_LISTS
        "billing/budget/",  # the target of the tenant home's budget form (POST only)
        "alerts/rules/",  # the target of the alerts page's new-rule form (POST only)
        "admin/",  # the records' admin: its roles in tests/portal/test_admin.py
    )
    pages = {
        "/" + route
        for route, _ in _named_routes()
        if not route.startswith(known_prefixes) and "<" not in route
    }
    assert not set(PAGES) & PUBLIC_PAGES
    assert pages == set(PAGES) | PUBLIC_PAGES


@pytest.mark.parametrize("url", sorted(PUBLIC_PAGES))
def test_public_pages_answer_anonymous_users_and_every_role(url, users, client):
    assert client.get(url).status_code == 200
    for role in ROLES:
        client.force_login(users[role])
        assert client.get(url).status_code == 200, (url, role)
        client.logout()


@pytest.mark.parametrize("url", sorted(PAGES))
def test_pages_answer_by_role(url, users, client):
    for role in ROLES:
        client.force_login(users[role])
        response = client.get(url)
        expected = 200 if role in PAGES[url] else 403
        assert response.status_code == expected, (url, role, response.status_code)
        client.logout()


def test_the_usage_page_by_project_shows_a_member_none_of_another_tenants(users, client, tenant_b):
    """A member's usage page offers its own tenant's projects only; another tenant's, by its
    project's slug or by the tenant, gives no row (kpis.md 3e)."""
    from datetime import UTC, datetime

    from portal.models import Project
    from tests.metering.factories import make_deployment, make_hourly_usage

    foreign = Project.objects.create(tenant=tenant_b, slug="b-only", name="B only")
    hour = datetime(2026, 3, 1, 10, tzinfo=UTC)
    make_hourly_usage(tenant_b, make_deployment(), hour, project_id=foreign.pk, requests=7)
    period = "?from=2026-03-01&to=2026-03-02"
    client.force_login(users["tenant"])
    own = client.get(f"/usage/{period}&project=b-only&format=csv")
    assert own.content.decode().splitlines()[1:] == []
    assert b"b-only" not in client.get(f"/usage/{period}").content
    assert client.get(f"/usage/{period}&tenant=tenant-b&project=b-only").status_code == 404
    for role in ("operator", "finance"):
        client.force_login(users[role])
        rows = client.get(f"/usage/{period}&tenant=tenant-b&format=csv").content.decode()
        # day, model, project, tier, requests
        assert rows.splitlines()[1].split(",")[2:5] == ["b-only", "standard", "7"], role


@pytest.mark.parametrize("role", ROLES)
def test_the_navigation_lists_the_pages_a_role_may_open(role, db):
    """The navigation reads who may open a page from the page's view: a role's entries are
    exactly the matrix's pages it may open, in the navigation's order."""
    from django.urls import reverse

    from portal.models import Role
    from portal.shell import nav_for, nav_items

    listed = [item["url"] for item in nav_for(Role(role))]
    ordered = [reverse(item.url_name) for item in nav_items()]
    assert listed == [url for url in ordered if role in PAGES[url]]
    assert nav_for(None) == []


def test_the_navigation_is_home_the_apps_pages_then_the_account():
    """Each app registers its pages (AppConfig.ready, in INSTALLED_APPS order) between the
    kernel's Home and its Account section."""
    from portal.shell import nav_items

    assert [(item.section, item.label) for item in nav_items()] == [
        ("", "Home"),
        ("Factory", "Usage"), ("Factory", "Metering"), ("Factory", "Incidents"),
        ("Factory", "SLA"),
        ("Billing", "Invoices"), ("Billing", "Credit notes"), ("Billing", "Month-end close"),
        ("Billing", "Receivables"), ("Billing", "Balances"), ("Billing", "Ledger"),
        ("Billing", "Price realization"), ("Billing", "Price book"), ("Billing", "Reservations"),
        ("Economics", "Flywheel"), ("Economics", "Investor view"), ("Economics", "Cockpit"),
        ("Economics", "Capacity plan"), ("Economics", "TFOM reports"),
        ("Economics", "Projects and chargeback"),
        ("Account", "Inbox"), ("Account", "Alerts"), ("Account", "Notifications"),
        ("Account", "API tokens"), ("Account", "Audit log"), ("Account", "API docs"),
    ]  # fmt: skip


@pytest.mark.parametrize("url", sorted(PAGES))
def test_pages_send_anonymous_users_to_login(url, client, db):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


@pytest.mark.parametrize("url", sorted(API_LISTS))
def test_api_lists_answer_by_role(url, users):
    for role in ROLES:
        client = APIClient()
        client.force_login(users[role])
        response = client.get(url)
        expected = 200 if role in API_LISTS[url] else 403
        assert response.status_code == expected, (url, role, response.status_code)


@pytest.mark.parametrize("url", sorted(API_LISTS))
def test_api_refuses_anonymous_requests(url, client, db):
    response = client.get(url)
    assert response.status_code in (401, 403)
    if response["Content-Type"].startswith("text/plain"):  # /metrics answers in text
        assert "credentials were not provided" in response.content.decode()
    else:
        assert response.json()["errors"][0]["message"]


def test_tenant_member_reads_no_tenant_record_not_even_its_own(users, tenant_b, token_client):
    api = token_client(users["tenant"])
    assert api.get("/api/v1/tenants").status_code == 403
    assert api.get("/api/v1/tenants/tenant-a").status_code == 403
    assert api.get("/api/v1/tenants/tenant-b").status_code == 403


def test_read_token_cannot_write(users, token_client):
    api = token_client(users["operator"], scopes=["read"])
    response = api.post("/api/v1/tenants", {"slug": "new", "name": "New"})
    assert response.status_code == 403
    assert "admin" in response.json()["errors"][0]["message"]
    assert not Tenant.objects.filter(slug="new").exists()


def test_admin_token_writes_and_leaves_an_audit_entry(users, token_client):
    api = token_client(users["operator"], scopes=["admin", "read"])
    response = api.post("/api/v1/tenants", {"slug": "new", "name": "New"})
    assert response.status_code == 201, response.json()
    entry = AuditEntry.objects.get(object_type="tenant", action="create")
    assert entry.actor == users["operator"]
    assert entry.after["slug"] == "new"
    response = api.patch("/api/v1/tenants/new", {"name": "Renamed"})
    assert response.status_code == 200
    update = AuditEntry.objects.get(object_type="tenant", action="update")
    assert (update.before["name"], update.after["name"]) == ("New", "Renamed")


def test_investor_cannot_write_even_with_a_session(users):
    client = APIClient()
    client.force_login(users["investor"])
    response = client.post("/api/v1/tenants", {"slug": "x", "name": "X"})
    assert response.status_code == 403
    assert not Tenant.objects.filter(slug="x").exists()


def test_revoked_token_is_refused(users, token_client, client):
    api = token_client(users["operator"])
    assert api.get("/api/v1/tenants").status_code == 200
    token = ApiToken.objects.get(user=users["operator"])
    client.force_login(users["operator"])
    assert client.post(f"/tokens/{token.pk}/revoke/").status_code == 302
    response = api.get("/api/v1/tenants")
    assert response.status_code == 401
    assert response.json()["errors"][0]["message"] == "Token has been revoked."


def test_unknown_token_is_refused(db, client):
    response = client.get("/api/v1/tenants", HTTP_AUTHORIZATION="Bearer tfp_not-a-token")
    assert response.status_code == 401


def test_tokens_are_not_stored_in_clear(users, client):
    client.force_login(users["finance"])
    response = client.post("/tokens/", {"name": "export", "scopes": ["read"]})
    raw = response.context["created"]
    assert raw.startswith("tfp_") and len(raw) > 40
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM portal_apitoken")
        rows = cursor.fetchall()
    assert len(rows) == 1
    assert all(raw not in str(value) for value in rows[0])
    assert hashlib.sha256(raw.encode()).hexdigest() in rows[0]


def test_roles_may_only_create_their_allowed_scopes(users, client):
    client.force_login(users["finance"])
    response = client.post("/tokens/", {"name": "x", "scopes": ["admin"]})
    assert response.status_code == 200
    assert response.context["created"] is None
    assert "admin" in str(response.context["form"].errors["scopes"])
    assert not ApiToken.objects.filter(user=users["finance"]).exists()


def test_create_token_command_prints_the_token_alone_on_its_last_line(db, capsys):
    from django.core.management import call_command

    call_command("create_token", user="ingestor", role="operator", scopes="ingest,read")
    raw = capsys.readouterr().out.strip().splitlines()[-1]
    token = ApiToken.objects.get(user__username="ingestor")
    assert raw.startswith("tfp_")
    assert token.digest == hashlib.sha256(raw.encode()).hexdigest()
    assert token.scopes == ["ingest", "read"]


def test_an_operator_binds_an_ingest_token_to_a_tenant_on_the_page_and_the_command(
    users, client, tenant_a, capsys
):
    from django.core.management import call_command

    client.force_login(users["operator"])
    # Offered by name, sent as the slug.
    assert (
        f'<option value="tenant-a">{tenant_a.name}</option>'
        in client.get("/tokens/").content.decode()
    )
    refused = client.post(
        "/tokens/", {"name": "gw", "scopes": ["read"], "bound_tenant": "tenant-a"}
    )
    assert "Only an ingest token can be bound" in str(refused.context["form"].errors)
    response = client.post(
        "/tokens/", {"name": "acme gateway", "scopes": ["ingest"], "bound_tenant": "tenant-a"}
    )
    assert response.context["created"]
    assert ApiToken.objects.get(name="acme gateway").bound_tenant == tenant_a
    assert "bound to tenant-a" in response.content.decode()

    call_command("create_token", user="gw", role="operator", scopes="ingest",
                 bind_tenant="tenant-a")  # fmt: skip
    assert ApiToken.objects.get(user__username="gw").bound_tenant == tenant_a
    client.force_login(users["finance"])  # no ingest scope: no binding offered
    assert "bound_tenant" not in client.get("/tokens/").context["form"].fields


def test_a_tenant_member_creates_its_own_gateways_ingest_token_on_its_page(
    users, client, tenant_a, tenant_b
):
    """No choice of tenant is offered to a member (no other tenant's name shown): its
    ingest token is bound to its own, and the page says so."""
    client.force_login(users["tenant"])
    page = client.get("/tokens/")
    form = page.context["form"]

    response = client.post(
        "/tokens/", {"name": "our gateway", "scopes": ["ingest"], "bound_tenant": "tenant-b"}
    )

    assert [c for c, _ in form.fields["scopes"].choices] == ["read", "ingest", "notify"]
    assert "bound_tenant" not in form.fields
    html = page.content.decode()
    assert "it is bound to Tenant A and meters Tenant A's usage only" in html
    assert "Tenant B" not in html
    assert response.context["created"]
    token = ApiToken.objects.get(name="our gateway")
    assert (token.scopes, token.bound_tenant) == (["ingest"], tenant_a)
    assert "bound to tenant-a" in response.content.decode()


def test_a_refused_page_logs_one_line_without_a_traceback(users, client, caplog):
    """Finance opening the operators' metering page: a 403, logged as one warning line."""
    import logging

    client.force_login(users["finance"])
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get("/metering/")

    assert response.status_code == 403
    logged = [r for r in caplog.records if r.name == "django.request"]
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in logged] == [
        ("WARNING", "Forbidden (Permission denied): /metering/", None)
    ]


def _auth_reads(captured) -> list[str]:
    """The statements of a request that read who it is: its user, groups, membership or
    token, or a tenant by its id."""
    tables = ('FROM "auth_user"', 'FROM "auth_group"', 'FROM "portal_membership"',
              'FROM "portal_apitoken"', 'FROM "portal_tenant" WHERE "portal_tenant"."id" =')  # fmt: skip
    return [q["sql"] for q in captured if any(t in q["sql"] for t in tables)]


@pytest.mark.parametrize("via", ["session", "token"])
def test_a_request_reads_its_user_tenant_and_role_in_one_query(via, users, make_user, tenant_a,
                                                              client, token_client):  # fmt: skip
    """Every page and API call asks who it is: the user, its tenant (a member's) and its
    role come in one query, and a user in several role groups still has the highest."""
    from django.contrib.auth.models import Group
    from django.test.utils import CaptureQueriesContext

    both = make_user("tenant", tenant=tenant_a, username="member-and-finance")
    both.groups.add(Group.objects.get(name="finance"))
    for user, role in ((users["tenant"], "tenant"), (users["operator"], "operator"),
                       (both, "finance")):  # fmt: skip
        if via == "session":
            client.force_login(user)
            reader, url = client, "/billing/ledger/"  # staff's alone: 403 for a member
        else:
            reader, url = token_client(user), "/api/v1/receivables"  # staff's alone
        with CaptureQueriesContext(connection) as captured:
            status = reader.get(url).status_code
        reads = _auth_reads(captured)
        assert len(reads) == 1, (via, role, reads)
        assert status == (403 if role == "tenant" else 200), (via, role, status)
        client.logout()


@pytest.mark.both_backends
@pytest.mark.parametrize(
    ("higher", "lower"),
    [("operator", "finance"), ("operator", "investor"), ("operator", "tenant"),
     ("finance", "investor"), ("finance", "tenant"), ("investor", "tenant")],
)  # fmt: skip
def test_a_user_in_two_role_groups_is_read_with_the_higher_role(higher, lower, make_user, tenant_a):
    from django.contrib.auth import get_user_model

    from portal.access import user_role, with_access

    user = make_user(lower, username="two-roles", tenant=tenant_a if lower == "tenant" else None)
    user.groups.add(*make_user(higher).groups.all())
    read = with_access(get_user_model().objects.filter(pk=user.pk)).get()
    assert user_role(read) == higher


def _as_read(token) -> tuple:
    """Everything a request takes from a token read with its user's access: the fields of the
    token, its user, the user's tenant and role, and what the token is bound to."""
    from portal.access import user_of, user_role, user_tenant

    user = user_of(token)
    tenant = user_tenant(user)

    def fields(obj):
        if obj is None:
            return None
        return type(obj), [(f.attname, getattr(obj, f.attname)) for f in obj._meta.concrete_fields]

    return (
        fields(token),
        fields(user),
        user.role_group,
        user_role(user),
        fields(tenant),
        fields(token.bound_tenant),
        fields(token.bound_project),
        fields(getattr(user, "membership", None)),
    )


@pytest.mark.both_backends
def test_the_token_read_in_one_statement_reads_what_the_orm_reads(
    users, tenant_a, tenant_b, django_assert_num_queries
):
    """The bearer token's read (one statement built once, prepared on PostgreSQL) against
    the ORM's query it replaces, for each role that may hold one, several role groups
    held, none, a token bound to a tenant and to its project, revoked and used ones, and an unknown
    digest: the same objects, field for field, and no query more when the request asks
    their relations."""
    from datetime import UTC, datetime

    from django.contrib.auth.models import Group

    from portal.access import token_with_access, with_access
    from portal.projects import project_create
    from portal.services import token_create, token_digest
    from tests.conftest import user_make

    alpha = project_create(tenant=tenant_b, slug="alpha", name="Alpha", by=users["operator"])
    member_b = user_make("tenant", tenant=tenant_b)
    several, none = (user_make("finance", username=name) for name in ("several", "no-role"))
    # An investor may hold no token: the other roles', the bound ones, a user of three roles
    # (finance ranks first) and one who lost every role after its token was made.
    made = [
        token_create(user=user, name=role, scopes=["read"])[0]
        for role, user in users.items()
        if role != "investor"
    ]
    made += [
        token_create(user=member_b, name="gw", scopes=["ingest"], bound_tenant=tenant_b)[0],
        token_create(
            user=member_b, name="gw-a", scopes=["ingest"], bound_tenant=tenant_b,
            bound_project=alpha,
        )[0],
        token_create(user=several, name="several", scopes=["read", "notify"])[0],
        token_create(user=none, name="no-role", scopes=["read"])[0],
    ]  # fmt: skip
    several.groups.add(*Group.objects.filter(name__in=["investor", "tenant"]))
    none.groups.clear()
    used = datetime(2026, 12, 1, 9, 30, 15, 123456, tzinfo=UTC)
    ApiToken.objects.filter(pk=made[0].pk).update(last_used_at=used, revoked_at=used)
    by_orm = with_access(
        ApiToken.objects.select_related("bound_tenant", "bound_project"), user="user"
    )
    for token in made:
        expected = _as_read(by_orm.get(pk=token.pk))
        read = token_with_access(token.digest)
        with django_assert_num_queries(0):
            assert _as_read(read) == expected, token.name
    assert token_with_access(made[0].digest).revoked_at == used
    assert token_with_access(token_digest("tfp_unknown")) is None
