"""A read snapshot's transaction on PostgreSQL begins REPEATABLE READ, READ ONLY in its BEGIN
(portal.snapshot), and leaves the connection as it found it: the next transaction, and a
write, as before; after a failure inside too."""

import pytest
from django.db import connection

from portal.models import Tenant
from portal.snapshot import read_snapshot

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

SETTINGS = (
    "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')"
)


def _settings() -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(SETTINGS)
        return cursor.fetchone()


def test_a_snapshot_reads_repeatable_read_read_only_then_the_connection_is_as_before():
    assert _settings() == ("read committed", "off")
    with read_snapshot():
        assert _settings() == ("repeatable read", "on")
    assert _settings() == ("read committed", "off")
    Tenant.objects.create(slug="after", name="After")  # writes again
    with pytest.raises(ZeroDivisionError), read_snapshot():
        assert _settings() == ("repeatable read", "on")
        _ = 1 / 0
    assert _settings() == ("read committed", "off")
    Tenant.objects.create(slug="after-failure", name="After failure")
    assert Tenant.objects.filter(slug__startswith="after").count() == 2


def test_a_get_reads_one_snapshot_and_its_session_is_written_after_it(client, users):
    """A page's figures read in the snapshot; the session's first view writes its start
    after the snapshot ended (a connection left read-only would fail it)."""
    from portal.middleware import SESSION_STARTED

    client.force_login(users["operator"])
    assert client.get("/metering/").status_code == 200
    assert SESSION_STARTED in client.session
    assert _settings() == ("read committed", "off")
