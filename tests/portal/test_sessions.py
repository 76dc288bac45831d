"""A browser session's user, read at every page by the portal's session engine and one
statement built once a connection (portal.sessions, portal.access.user_with_access): what
Django's reads made, and no user for a session signed out, expired, of a changed password
or of an inactive user."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.utils import timezone

from portal.access import user_role, user_tenant, user_with_access, with_access

pytestmark = pytest.mark.both_backends

PAGE = "/usage/"  # a page of every role but the investor


def _as_read(user) -> tuple:
    """Everything a request takes from its user: its fields, role group, role, tenant and
    membership."""

    def fields(obj):
        if obj is None:
            return None
        return type(obj), [(f.attname, getattr(obj, f.attname)) for f in obj._meta.concrete_fields]

    return (
        fields(user),
        user.role_group,
        user_role(user),
        fields(user_tenant(user)),
        fields(getattr(user, "membership", None)),
    )


def test_the_user_read_in_one_statement_reads_what_the_orm_reads(
    users, make_user, tenant_b, django_assert_num_queries
):
    """Each role, a member of another tenant, a user of several role groups (the highest
    read), one of none, an inactive one: the same objects, field for field, and no query
    more when the request asks their relations; an unknown id reads none."""
    from django.contrib.auth.models import Group

    several = make_user("tenant", tenant=tenant_b, username="several")
    several.groups.add(*Group.objects.filter(name__in=["investor", "finance"]))
    none = make_user("finance", username="no-role")
    none.groups.clear()
    inactive = make_user("operator", username="gone")
    get_user_model().objects.filter(pk=inactive.pk).update(is_active=False)
    by_orm = with_access(get_user_model().objects.all())
    for user in [*users.values(), several, none, inactive]:
        expected = _as_read(by_orm.get(pk=user.pk))
        read = user_with_access(user.pk)
        with django_assert_num_queries(0):
            assert _as_read(read) == expected, user.username
    assert _as_read(user_with_access(several.pk))[2] == "finance"
    assert user_with_access(inactive.pk + 1000) is None


def _user_of(client, *, status: int = 200):
    """The user of a page's request, as the page saw it."""
    response = client.get(PAGE)
    assert response.status_code == status
    user = response.wsgi_request.user
    return user._wrapped if hasattr(user, "_wrapped") else user


def test_a_signed_in_session_reads_its_user_a_real_one(client, users):
    client.force_login(users["tenant"])
    user = _user_of(client)
    assert type(user) is get_user_model()
    assert (user.pk, user_role(user), user_tenant(user).slug) == (
        users["tenant"].pk,
        "tenant",
        "tenant-a",
    )


def test_a_signed_out_session_reads_no_user(client, users):
    client.force_login(users["operator"])
    key = client.session.session_key
    assert _user_of(client).pk == users["operator"].pk
    client.logout()
    client.cookies["sessionid"] = key  # the signed-out session's cookie, sent again
    assert _user_of(client, status=302).is_authenticated is False


def test_an_expired_session_reads_no_user(client, users):
    """A session one second past its expiry is not read (the statement's expiry test)."""
    client.force_login(users["operator"])
    key = client.session.session_key
    assert _user_of(client).pk == users["operator"].pk
    expired = timezone.now() - timedelta(seconds=1)  # noqa: TID251 - the session clock is real
    Session.objects.filter(pk=key).update(expire_date=expired)
    assert _user_of(client, status=302).is_authenticated is False


def test_a_password_changed_elsewhere_ends_the_session(client, users):
    """The session's hash of the password no longer matches: no user, the session flushed."""
    operator = users["operator"]
    client.force_login(operator)
    key = client.session.session_key
    assert _user_of(client).pk == operator.pk
    operator.set_password("another-long-passphrase-42")
    operator.save()
    assert _user_of(client, status=302).is_authenticated is False
    assert not Session.objects.filter(pk=key).exists()


def test_an_inactive_users_session_reads_no_user(client, users):
    client.force_login(users["operator"])
    assert _user_of(client).pk == users["operator"].pk
    get_user_model().objects.filter(pk=users["operator"].pk).update(is_active=False)
    assert _user_of(client, status=302).is_authenticated is False
