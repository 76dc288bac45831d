"""A suspended (or closed) tenant's members are refused everywhere: their open sessions end,
sign-in, API tokens they hold and new tokens are refused. Usage is still ingested for a
suspended tenant (tests/metering)."""

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from portal.models import Tenant
from portal.services import token_create
from tests.conftest import PASSWORD


@pytest.fixture
def suspended(tenant_a):
    def suspend(status=Tenant.Status.SUSPENDED):
        Tenant.objects.filter(pk=tenant_a.pk).update(status=status)

    return suspend


@pytest.mark.parametrize("status", [Tenant.Status.SUSPENDED, Tenant.Status.CLOSED])
def test_an_open_session_ends_when_its_tenant_is_suspended(client, users, suspended, status):
    member = users["tenant"]
    client.force_login(member)
    assert client.get("/billing/invoices/").status_code == 200

    suspended(status)
    page = client.get("/billing/invoices/")
    api = client.get("/api/v1/invoices")

    assert page.status_code == 302 and page.url.startswith("/login/")
    assert api.status_code in (401, 403)
    assert client.get("/billing/invoices/").status_code == 302  # signed out, not just refused


def test_sign_in_is_refused_after_the_password(client, users, suspended):
    suspended()

    response = client.post("/login/", {"username": users["tenant"].username, "password": PASSWORD})

    assert response.status_code == 200
    assert "Tenant A is suspended" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_tokens_are_refused_and_none_can_be_made(users, token_client, suspended):
    member = users["tenant"]
    api = token_client(member)  # made while the tenant was active
    assert api.get("/api/v1/invoices").status_code == 200

    suspended()

    assert api.get("/api/v1/invoices").status_code == 401
    with pytest.raises(ValidationError, match="suspended"):
        token_create(user=User.objects.get(pk=member.pk), name="new", scopes=["read"])


def test_staff_are_not_affected(client, users, suspended):
    suspended()
    client.force_login(users["finance"])

    assert client.get("/billing/invoices/?tenant=tenant-a").status_code == 200
