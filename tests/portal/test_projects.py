"""A tenant's projects (kpis.md 3e): the API as each role and as another tenant, the audit
log, the limit of 1,000 a tenant, and API tokens bound to a project."""

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from portal.models import ApiToken, AuditEntry, Project
from portal.projects import MAX_PROJECTS
from portal.services import token_create

pytestmark = pytest.mark.both_backends

URL = "/api/v1/tenants/{}/projects"


@pytest.fixture
def search(tenant_a):
    return Project.objects.create(tenant=tenant_a, slug="search", name="Search")


def test_a_member_creates_lists_and_renames_its_own_projects(users, token_client, tenant_a):
    api = token_client(users["tenant"], scopes=["read", "notify"])

    created = api.post(
        URL.format("tenant-a"),
        {"slug": "support-bot", "name": "Support bot", "cost_center": "CC-7"},
        format="json",
    )
    renamed = api.patch(
        URL.format("tenant-a") + "/support-bot",
        {"name": "Support", "cost_center": ""},
        format="json",
    )
    listed = api.get(URL.format("tenant-a")).json()

    assert created.status_code == 201, created.json()
    assert renamed.status_code == 200, renamed.json()
    assert [(p["slug"], p["name"], p["cost_center"]) for p in listed["results"]] == [
        ("support-bot", "Support", "")
    ]
    entries = AuditEntry.objects.filter(object_type="project").order_by("pk")
    assert [(e.action, e.actor.username, e.after["name"]) for e in entries] == [
        ("create", "tenant-tenant-a", "Support bot"),
        ("update", "tenant-tenant-a", "Support"),
    ]
    assert entries[1].before["cost_center"] == "CC-7"


def test_another_tenants_projects_are_404_to_a_member_and_investors_are_refused(
    users, token_client, tenant_b, search, session_client
):
    Project.objects.create(tenant=tenant_b, slug="eval", name="Eval")
    member = token_client(users["tenant"], scopes=["read", "notify"])
    for response in (
        member.get(URL.format("tenant-b")),
        member.get(URL.format("tenant-b") + "/eval"),
        member.post(URL.format("tenant-b"), {"slug": "x", "name": "X"}, format="json"),
        member.patch(URL.format("tenant-b") + "/eval", {"name": "Mine"}, format="json"),
    ):
        assert response.status_code == 404
    client = session_client(users["investor"])  # an investor holds no token
    assert client.get(URL.format("tenant-a")).status_code == 403
    assert client.post(URL.format("tenant-a"), {"slug": "x", "name": "X"}).status_code == 403
    assert Project.objects.filter(tenant=tenant_b).get().name == "Eval"
    assert not Project.objects.filter(slug="x").exists()


def test_operators_and_finance_write_any_tenants_projects(users, token_client, tenant_b):
    operator = token_client(users["operator"], scopes=["read", "admin"])
    finance = token_client(users["finance"], scopes=["read", "notify"])
    assert (
        operator.post(
            URL.format("tenant-b"), {"slug": "eval", "name": "Eval"}, format="json"
        ).status_code
        == 201
    )
    assert (
        finance.patch(
            URL.format("tenant-b") + "/eval", {"cost_center": "CC-1"}, format="json"
        ).status_code
        == 200
    )
    assert finance.get(URL.format("tenant-b")).json()["results"][0]["cost_center"] == "CC-1"


def test_a_read_token_writes_no_project(users, token_client):
    api = token_client(users["tenant"], scopes=["read"])
    response = api.post(URL.format("tenant-a"), {"slug": "x", "name": "X"}, format="json")
    assert response.status_code == 403
    assert not Project.objects.exists()


def test_bad_projects_are_refused_naming_the_field_and_nothing_is_stored(
    users, token_client, search
):
    api = token_client(users["operator"], scopes=["read", "admin"])
    cases = [
        ({"slug": "no spaces", "name": "X"}, 400, "slug"),
        ({"slug": "x" * 65, "name": "X"}, 400, "slug"),
        ({"slug": "ok", "name": "N" * 201}, 400, "name"),
        ({"slug": "search", "name": "Again"}, 409, "slug"),
    ]
    for body, status, field in cases:
        response = api.post(URL.format("tenant-a"), body, format="json")
        assert response.status_code == status, body
        assert response.json()["errors"][0]["field"] == field
    renamed = api.patch(URL.format("tenant-a") + "/search", {"slug": "find"}, format="json")
    assert renamed.status_code == 400
    assert renamed.json()["errors"][0]["field"] == "slug"
    assert list(Project.objects.values_list("slug", "name")) == [("search", "Search")]


def test_the_1001st_project_is_refused(users, token_client, tenant_a):
    Project.objects.bulk_create(
        Project(tenant=tenant_a, slug=f"p{i}", name=f"P{i}") for i in range(MAX_PROJECTS)
    )
    api = token_client(users["tenant"], scopes=["read", "notify"])
    response = api.post(URL.format("tenant-a"), {"slug": "one-more", "name": "X"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "field": "slug",
            "message": "tenant 'tenant-a' has 1,000 projects, the most a tenant may have: "
            "name one of them",
        }
    ]
    assert Project.objects.count() == MAX_PROJECTS


def test_a_member_binds_its_ingest_tokens_to_its_own_projects_only(
    users, tenant_a, tenant_b, search
):
    eval_b = Project.objects.create(tenant=tenant_b, slug="eval", name="Eval")
    token, _ = token_create(
        user=users["tenant"], name="gateway", scopes=["ingest"], bound_project=search
    )
    assert (token.bound_tenant, token.bound_project) == (tenant_a, search)
    plain, _ = token_create(user=users["tenant"], name="gateway", scopes=["ingest"])
    assert (plain.bound_tenant, plain.bound_project) == (tenant_a, None)  # always its own
    with pytest.raises(ValidationError) as other_project:
        token_create(user=users["tenant"], name="x", scopes=["ingest"], bound_project=eval_b)
    with pytest.raises(ValidationError) as other_tenant:
        token_create(user=users["tenant"], name="x", scopes=["ingest"], bound_tenant=tenant_b)
    assert other_project.value.message_dict == {
        "bound_project": ["Not a project of tenant 'tenant-a'."]
    }
    assert "bound_tenant" in other_tenant.value.message_dict
    assert ApiToken.objects.filter(user=users["tenant"]).count() == 2


def test_an_operator_binds_a_token_to_a_tenant_and_one_of_its_projects(users, tenant_b, search):
    with pytest.raises(ValidationError) as mismatched:
        token_create(
            user=users["operator"],
            name="x",
            scopes=["ingest"],
            bound_tenant=tenant_b,
            bound_project=search,
        )
    assert mismatched.value.message_dict == {
        "bound_project": ["Not a project of tenant 'tenant-b'."]
    }
    with pytest.raises(ValidationError):  # a project binds an ingest token only
        token_create(user=users["operator"], name="x", scopes=["read"], bound_project=search)


def test_create_token_binds_a_project(users, search, capsys):
    call_command(
        "create_token", "--user", "gateway", "--role", "operator", "--scopes", "ingest",
        "--bind-tenant", "tenant-a", "--bind-project", "search",
    )  # fmt: skip
    token = ApiToken.objects.get(user__username="gateway")
    assert (token.bound_tenant.slug, token.bound_project.slug) == ("tenant-a", "search")
    assert "bound to tenant tenant-a and its project search" in capsys.readouterr().err


def test_the_tokens_page_offers_a_member_its_own_projects_only(
    users, session_client, tenant_b, search
):
    eval_b = Project.objects.create(tenant=tenant_b, slug="eval", name="Eval")
    client = session_client(users["tenant"])
    page = client.get("/tokens/").content.decode()
    assert "Search" in page and "Eval" not in page and 'name="bound_tenant"' not in page
    refused = client.post(
        "/tokens/", {"name": "gw", "scopes": ["ingest"], "bound_project": eval_b.pk}
    )
    assert "Select a valid choice" in refused.content.decode()
    client.post("/tokens/", {"name": "gw", "scopes": ["ingest"], "bound_project": search.pk})
    token = ApiToken.objects.get(user=users["tenant"])
    assert (token.bound_tenant.slug, token.bound_project.slug) == ("tenant-a", "search")


def test_an_operator_names_a_project_of_the_chosen_tenant_on_the_tokens_page(
    users, session_client, tenant_a, tenant_b, search
):
    """The operator's form lists no tenant's projects (thousands with many tenants): it
    suggests the chosen tenant's, and refuses naming `bound_project` a slug that tenant has
    no project of, another tenant's included."""
    Project.objects.create(tenant=tenant_b, slug="eval", name="Eval")
    client = session_client(users["operator"])
    page = client.get("/tokens/").content.decode()
    chosen = client.get("/tokens/?bound_tenant=tenant-a").content.decode()
    gateway = {"name": "gw", "scopes": ["ingest"], "bound_tenant": "tenant-a"}
    another = client.post("/tokens/", {**gateway, "bound_project": "eval"})
    unknown = client.post("/tokens/", {**gateway, "bound_project": "nope"})
    no_tenant = client.post("/tokens/", {**gateway, "bound_tenant": "", "bound_project": "eval"})
    bound = client.post("/tokens/", {**gateway, "bound_project": "search"})

    assert "Search" not in page and "Eval" not in page
    assert '<option value="search">Search</option>' in chosen and "Eval" not in chosen
    assert another.context["form"].errors == {
        "bound_project": ["No project 'eval' of tenant 'tenant-a'."]
    }
    assert unknown.context["form"].errors == {
        "bound_project": ["No project 'nope' of tenant 'tenant-a'."]
    }
    assert '<option value="eval">Eval</option>' not in another.content.decode()
    assert no_tenant.context["form"].errors == {
        "bound_tenant": ["Choose the tenant of project 'eval'."]
    }
    assert bound.context["created"]
    token = ApiToken.objects.get(user=users["operator"])
    assert (token.bound_tenant.slug, token.bound_project.slug) == ("tenant-a", "search")
