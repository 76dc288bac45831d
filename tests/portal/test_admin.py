"""The admin (portal.admin) for the records operators fix by hand: on the portal's roles, its
writes checked and stored as the API's (the serializer's rules, the app's service, the
audit log), effective-dated records read only."""

from decimal import Decimal

import pytest

from billing.models import Price
from metering.models import Pool
from portal.models import AuditEntry, Tenant
from tests.billing.factories import make_priced_model

pytestmark = pytest.mark.both_backends


@pytest.fixture
def factory(db, now):
    make_priced_model()  # the pool h100-a, the deployment llama-70b@h100-a and its prices
    return Pool.objects.get(slug="h100-a")


def _form(pool: Pool, **changes) -> dict:
    fields = {
        "slug": pool.slug, "name": pool.name, "gpu_type": pool.gpu_type,
        "gpu_count": pool.gpu_count, "site": pool.site,
        "in_service_from_0": "", "in_service_from_1": "", "retired_at_0": "", "retired_at_1": "",
    }  # fmt: skip
    return fields | changes


def test_operators_and_finance_see_the_records_investors_and_members_are_refused(
    factory, users, session_client
):
    for role in ("operator", "finance"):
        page = session_client(users[role]).get("/admin/")
        assert page.status_code == 200, role
        for model in ("Tenants", "Pools", "Scrape targets", "Deployments", "Prices", "Contracts"):
            assert model in page.content.decode(), (role, model)
    for role in ("investor", "tenant"):
        assert session_client(users[role]).get("/admin/").status_code == 403, role


def test_every_admin_page_refuses_investors_and_members_reading_or_writing(
    factory, users, session_client
):
    """Each record's list, add, change, delete and history page, and the site's own pages
    (GET and POST): 403, nothing written."""
    from django.contrib.contenttypes.models import ContentType

    from portal.admin import site

    urls = ["/admin/", "/admin/password_change/", "/admin/jsi18n/", "/admin/autocomplete/"]
    for model, _ in site._registry.items():
        base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        pk = model.objects.values_list("pk", flat=True).first() or 1
        urls += [base, f"{base}add/", f"{base}{pk}/change/", f"{base}{pk}/delete/",
                 f"{base}{pk}/history/"]  # fmt: skip
    urls.append(f"/admin/r/{ContentType.objects.get_for_model(Pool).pk}/{factory.pk}/")
    audited = AuditEntry.objects.count()
    for role in ("investor", "tenant"):
        client = session_client(users[role])
        for url in urls:
            assert client.get(url).status_code == 403, (role, url)
            assert client.post(url, {"slug": "x", "name": "x"}).status_code == 403, (role, url)
    assert AuditEntry.objects.count() == audited
    assert Pool.objects.get().slug == "h100-a"


def test_signing_in_is_the_portals_own_then_back_to_the_admin(client, users):
    response = client.get("/admin/", follow=True)

    assert response.redirect_chain[-1] == ("/login/?next=/admin/", 302)
    client.force_login(users["operator"])
    assert client.get("/admin/login/?next=/admin/metering/pool/")["Location"] == (
        "/admin/metering/pool/"
    )


def test_an_operator_changes_a_pool_through_its_service_and_the_change_is_audited(
    factory, users, session_client
):
    client = session_client(users["operator"])

    response = client.post(
        f"/admin/metering/pool/{factory.pk}/change/", _form(factory, gpu_count=16)
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    factory.refresh_from_db()
    assert factory.gpu_count == 16
    entry = AuditEntry.objects.get(action="update", object_type="pool")
    assert (entry.actor, entry.before["gpu_count"], entry.after["gpu_count"]) == (
        users["operator"], 8, 16
    )  # fmt: skip


def test_the_apis_rules_are_the_forms_errors_and_nothing_is_stored(factory, users, session_client):
    client = session_client(users["operator"])
    url = f"/admin/metering/pool/{factory.pk}/change/"
    backwards = _form(
        factory,
        in_service_from_0="2026-11-03", in_service_from_1="07:00:00",
        retired_at_0="2026-11-01", retired_at_1="00:00:00",
    )  # fmt: skip

    refused = client.post(url, backwards)
    renamed = client.post(url, _form(factory, slug="h100-b"))  # its deployment refers to it

    assert (
        refused.status_code == 200 and "must be after in_service_from" in refused.content.decode()
    )
    assert renamed.status_code == 200 and "cannot change" in renamed.content.decode()
    factory.refresh_from_db()
    assert (factory.slug, factory.retired_at) == ("h100-a", None)
    assert not AuditEntry.objects.filter(object_type="pool", action="update").exists()


def test_finance_reads_the_factory_records_but_may_not_change_them(factory, users, session_client):
    client = session_client(users["finance"])

    assert client.get(f"/admin/metering/pool/{factory.pk}/change/").status_code == 200
    response = client.post(
        f"/admin/metering/pool/{factory.pk}/change/", _form(factory, gpu_count=1)
    )

    assert response.status_code == 403
    factory.refresh_from_db()
    assert factory.gpu_count == 8


def test_prices_are_read_only_even_for_an_operator(factory, users, session_client):
    client = session_client(users["operator"])
    price = Price.objects.filter(token_class="input").get()

    page = client.get(f"/admin/billing/price/{price.pk}/change/").content.decode()
    changed = client.post(
        f"/admin/billing/price/{price.pk}/change/", {"per_million": "9.99", "currency": "USD"}
    )

    assert 'name="_save"' not in page and "0.88" in page
    assert changed.status_code == 403
    assert client.get("/admin/billing/price/add/").status_code == 403
    price.refresh_from_db()
    assert price.per_million == Decimal("0.88")


def test_a_tenant_created_in_the_admin_is_audited_as_by_the_api(users, session_client, now):
    client = session_client(users["operator"])

    response = client.post(
        "/admin/portal/tenant/add/",
        {"slug": "initech", "name": "Initech", "status": "active", "billing_name": "",
         "billing_address": ""},
    )  # fmt: skip

    assert response.status_code == 302, response.content.decode()[:2000]
    tenant = Tenant.objects.get(slug="initech")
    entry = AuditEntry.objects.get(action="create", object_type="tenant")
    assert (entry.object_id, entry.after["name"], entry.actor) == (
        str(tenant.pk), "Initech", users["operator"]
    )  # fmt: skip


def test_a_records_history_is_the_audit_log(factory, users, session_client):
    client = session_client(users["operator"])

    response = client.get(f"/admin/metering/pool/{factory.pk}/history/")

    assert response["Location"] == "/audit/?object_type=pool"
