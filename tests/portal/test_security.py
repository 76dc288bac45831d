"""Sign-in lockout, API quotas, session timeouts, CSRF, append-only audit, database down."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core import checks
from django.core.cache import cache
from django.db import DatabaseError, OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from portal.middleware import SESSION_REFRESHED, SESSION_STARTED
from portal.models import ApiToken, AuditEntry
from portal.security import QuotaThrottle, login_failed, login_locked_for
from portal.services import audit_record
from tests.concurrency import run_together
from tests.conftest import PASSWORD


@pytest.fixture(autouse=True)
def _clean_cache():
    cache.clear()
    yield
    cache.clear()


def _sign_in(client, username, password):
    return client.post("/login/", {"username": username, "password": password})


@pytest.mark.both_backends
def test_five_failures_lock_the_account_out(client, users, settings):
    settings.LOGIN_FAILURE_LIMIT = 5
    for _ in range(5):
        assert _sign_in(client, "operator-user", "wrong").status_code == 200
    locked = _sign_in(client, "operator-user", PASSWORD)  # even the right password
    assert locked.status_code == 429
    assert "Too many failed sign-ins. Try again in 15 minutes." in locked.content.decode()
    assert "_auth_user_id" not in client.session


@pytest.mark.both_backends
def test_the_lockout_counts_one_account_whatever_its_spelling(client, users, settings):
    """Surrounding spaces and compatibility forms name the same account (authentication
    reads them so), hence the same counter; another case is another account."""
    settings.LOGIN_FAILURE_LIMIT = 5
    for spelling in ("operator-user", " operator-user", "operator-user ", "ｏperator-user",
                     "\toperator-user"):  # fmt: skip
        assert _sign_in(client, spelling, "wrong").status_code == 200
    for spelling in (" operator-user", "operator-user ", "ｏperator-user"):
        assert _sign_in(client, spelling, PASSWORD).status_code == 429, spelling
    assert "_auth_user_id" not in client.session
    for _ in range(5):
        _sign_in(client, "OPERATOR-USER", "wrong")  # another account's counter (none such)
    settings.LOGIN_FAILURE_LIMIT = 6
    assert _sign_in(client, "operator-user", PASSWORD).status_code == 302


@pytest.mark.both_backends
def test_a_success_before_the_limit_resets_the_count(client, users):
    for _ in range(4):
        _sign_in(client, "finance-user", "wrong")
    assert _sign_in(client, "finance-user", PASSWORD).status_code == 302
    client.logout()
    for _ in range(4):
        _sign_in(client, "finance-user", "wrong")
    assert _sign_in(client, "finance-user", PASSWORD).status_code == 302


@pytest.mark.both_backends
def test_api_quota_answers_429_with_retry_after(users, token_client, monkeypatch):
    monkeypatch.setattr(QuotaThrottle, "THROTTLE_RATES", {"read": "3/min", "write": "3/min",
                                                          "ingest": "3/min"})  # fmt: skip
    api = token_client(users["operator"])
    statuses = [api.get("/api/v1/pools").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    refused = api.get("/api/v1/pools")
    assert int(refused["Retry-After"]) > 0
    assert "throttled" in refused.json()["errors"][0]["message"].lower()


class _Request:
    """What the quota reads of a request: a GET with token 7."""

    method = "GET"
    user = None
    auth = ApiToken(pk=7)


def test_api_quota_counts_every_one_of_many_concurrent_requests():
    """Twenty requests of one token at the same moment against a quota of ten: ten pass,
    the rest are refused (a quota kept as a list read and written back lets requests that
    land in between through uncounted)."""
    rates = {"read": "10/min", "write": "10/min", "ingest": "10/min"}

    def ask(_):
        throttle = QuotaThrottle()
        throttle.THROTTLE_RATES = rates
        return throttle.allow_request(_Request(), view=None)

    results, errors = run_together(ask, range(20), timeout=60)
    assert errors == []
    assert results.count(True) == 10


@pytest.mark.parametrize("one_round_trip", [True, False])
def test_api_quota_slides_over_the_previous_window(monkeypatch, one_round_trip):
    """3 a minute: 3 requests at 0 s, the 4th refused until 80 s (20 s into the second
    minute the first minute's 3 weigh 3 × 2/3 = 2, and one more fits); refused requests
    are not counted. Alike counted by Redis in one round trip and by any other cache."""
    from portal.cache import RedisCache

    if not one_round_trip:
        monkeypatch.delattr(RedisCache, "window_count")
    clock = [0.0]
    monkeypatch.setattr(QuotaThrottle, "timer", lambda self: clock[0])
    monkeypatch.setattr(QuotaThrottle, "THROTTLE_RATES", {"read": "3/min"})

    def ask(at):
        clock[0] = 60_000_000 + at  # a whole number of minutes, then `at` seconds
        throttle = QuotaThrottle()
        return throttle.allow_request(_Request(), view=None), throttle.wait()

    assert [ask(0.0) for _ in range(3)] == [(True, None)] * 3
    assert ask(0.0) == (False, pytest.approx(80))
    assert ask(30.0) == (False, pytest.approx(50))  # refusals do not move the time to wait
    assert ask(79.0) == (False, pytest.approx(1))
    assert ask(79.5) == (False, 1.0)  # half a second left: said as one second
    assert ask(80.0) == (True, None)
    # 3 × (1 - t/60) + 1 + 1 ≤ 3 from t = 40 s into the second minute
    assert ask(80.0) == (False, pytest.approx(20))
    assert ask(99.0) == (False, pytest.approx(1))
    assert ask(100.0) == (True, None)


@pytest.mark.both_backends
def test_session_absolute_timeout_signs_out_an_active_user(client, users, settings):
    settings.SESSION_ABSOLUTE_SECONDS = 3600
    client.force_login(users["operator"])
    assert client.get("/usage/").status_code == 200
    session = client.session
    session[SESSION_STARTED] = int(time.time()) - 3601  # noqa: TID251 - the session clock is real
    session.save()
    response = client.get("/usage/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
    assert client.get("/api/v1/pools").status_code == 401  # signed out


@pytest.mark.both_backends
def test_page_views_restart_the_idle_timeout_at_most_once_a_minute(client, users):
    """A page view reads the session; the idle timeout's restart (the session saved, its
    cookie sent again with a new expiry) is written at most once a minute."""
    client.force_login(users["operator"])
    assert "sessionid" in client.get("/usage/").cookies  # the first view: the start written
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/usage/")
    assert "sessionid" not in response.cookies
    assert not [
        q for q in queries if q["sql"].startswith("UPDATE") and "django_session" in q["sql"]
    ]
    session = client.session
    session[SESSION_REFRESHED] -= 60
    session.save()
    assert "sessionid" in client.get("/usage/").cookies  # a minute on: the timeout restarted


@pytest.mark.both_backends
def test_session_posts_need_the_csrf_token(users):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(users["operator"])
    response = client.post("/api/v1/pools", {"slug": "p", "name": "p", "gpu_type": "H100",
                                             "gpu_count": 1})  # fmt: skip
    assert response.status_code == 403
    assert "CSRF" in response.json()["errors"][0]["message"]


@pytest.mark.both_backends
def test_audit_entries_refuse_changes_through_the_orm(db):
    entry = audit_record(actor=None, action="test", object_type="t", object_id="1")
    entry.action = "rewritten"
    with pytest.raises(PermissionError):
        entry.save()
    with pytest.raises(PermissionError):
        entry.delete()
    with pytest.raises(PermissionError):
        AuditEntry.objects.filter(pk=entry.pk).update(action="rewritten")
    assert AuditEntry.objects.get(pk=entry.pk).action == "test"


@pytest.mark.postgres_only
@pytest.mark.parametrize(
    "sql", ["UPDATE portal_auditentry SET action = 'x'", "DELETE FROM portal_auditentry"]
)
def test_audit_entries_refuse_changes_through_sql(db, sql):
    audit_record(actor=None, action="test", object_type="t", object_id="1")
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(sql)
    assert AuditEntry.objects.get().action == "test"


@pytest.mark.postgres_only
def test_deleting_a_user_keeps_their_audit_entries(db, make_user):
    user = make_user("operator", username="leaver")
    audit_record(actor=user, action="test", object_type="t", object_id="1")
    user.delete()
    assert AuditEntry.objects.get(action="test").actor is None


@pytest.mark.both_backends
def test_database_down_gives_503_pages_and_api(client, users, monkeypatch):
    client.force_login(users["operator"])
    from metering.views import usage as views

    def down(**kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(views, "usage_daily_by_model", down)
    page = client.get("/usage/")
    assert page.status_code == 503
    assert page["Retry-After"] == "30"
    assert "database is unavailable" in page.content.decode()
    monkeypatch.setattr("metering.api.usage.usage_list", down)
    api = client.get("/api/v1/usage")
    assert (api.status_code, api["Retry-After"]) == (503, "30")
    assert api.json()["errors"][0]["message"] == "The database is unavailable; retry shortly."


def test_production_hashes_passwords_with_argon2id_and_the_suite_still_verifies_them(db):
    """Production settings store Argon2id hashes; the suite's faster first hasher must not
    hide them: a password hashed as production does still signs in."""
    from django.contrib.auth import authenticate
    from django.contrib.auth.hashers import Argon2PasswordHasher, make_password

    from portal.models import Role
    from portal.services import user_ensure
    from portal.settings import PASSWORD_HASHERS

    assert PASSWORD_HASHERS[0] == "django.contrib.auth.hashers.Argon2PasswordHasher"
    user = user_ensure(username="argon", role=Role.OPERATOR, password="unused-password-1")
    user.password = make_password("argon-password-1", hasher=Argon2PasswordHasher())
    user.save(update_fields=["password"])

    assert user.password.startswith("argon2$argon2id$")
    assert authenticate(username="argon", password="argon-password-1") == user


# One web process counts three failures and another two: with the shared cache (Redis) the
# username is locked, as one process with five failures would be.
OTHER_PROCESS_FAILS = """
import django
django.setup()
from portal.security import login_failed
for _ in range(3):
    login_failed(username="spread-out", ip="10.0.0.1")
"""


def test_failures_in_two_processes_add_up_to_a_lockout(db, settings):
    location = str(settings.CACHES["default"].get("LOCATION", ""))
    if not location.startswith("redis://"):
        pytest.skip("needs REDIS_URL (scripts/with-services.sh starts a throwaway Redis)")
    settings.LOGIN_FAILURE_LIMIT = 5
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "REDIS_URL": location}
    subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS_FAILS],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        check=True,
        timeout=60,
    )
    assert login_locked_for(username="spread-out", ip="10.0.0.2") == 0
    login_failed(username="spread-out", ip="10.0.0.2")
    login_failed(username="spread-out", ip="10.0.0.2")

    assert login_locked_for(username="spread-out", ip="10.0.0.2") == 15 * 60


LOCAL_CACHE_WARNING = (
    "The cache that counts sign-in failures and API quotas (CACHES['default']) is "
    "django.core.cache.backends.locmem.LocMemCache: each process counts on its own, so "
    "failures spread over processes never lock an account out and every process grants "
    "the full quota."
)


@pytest.mark.parametrize(
    "backend",
    [
        "django.core.cache.backends.locmem.LocMemCache",
        "django.core.cache.backends.dummy.DummyCache",
    ],
)
def test_deploy_check_warns_when_lockout_and_quotas_are_counted_per_process(settings, backend):
    settings.CACHES = {"default": {"BACKEND": backend}}

    warnings = [
        m for m in checks.run_checks(include_deployment_checks=True) if m.id == "portal.W001"
    ]

    assert [w.msg for w in warnings] == [LOCAL_CACHE_WARNING.replace(
        "django.core.cache.backends.locmem.LocMemCache", backend)]  # fmt: skip
    assert warnings[0].hint == "Set REDIS_URL so that every process shares one Redis cache."
    assert warnings[0].level == checks.WARNING


def test_deploy_check_is_quiet_with_redis_and_outside_deploy(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert [m.id for m in checks.run_checks() if m.id == "portal.W001"] == []

    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:6379/1",
        }
    }
    deploy = checks.run_checks(include_deployment_checks=True)
    assert [m.id for m in deploy if m.id == "portal.W001"] == []


@pytest.mark.both_backends
def test_signed_in_answers_are_never_cached(client, users):
    client.force_login(users["finance"])
    for url in ("/", "/billing/invoices/", "/api/v1/invoices"):
        control = client.get(url)["Cache-Control"]
        assert "no-store" in control and "private" in control, (url, control)
    client.logout()
    assert "no-store" not in client.get("/status/").get("Cache-Control", "")
