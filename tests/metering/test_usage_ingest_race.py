"""SQLite: a batch whose keys another writer stores between this writer's read of the stored
keys and its insert (the read comes before the transaction takes the write lock): the
insert fails on the key, and the second pass, reading under the lock, counts a replay as a
duplicate and refuses a changed payload, storing nothing twice and nothing of a refused
batch."""

from datetime import UTC, datetime

import pytest
from django.db import connection

from metering.domain.usage.validation import validate_events
from metering.models import EventKey, UsageEvent
from metering.services.usage import store
from metering.services.usage.ingest import IngestConflict, usage_ingest
from portal.models import Tenant
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.both_backends
NOW = datetime(2026, 4, 1, tzinfo=UTC)


@pytest.fixture
def factory(db):
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL reads and inserts in one statement")
    Tenant.objects.create(slug="t1", name="T1")
    make_deployment(model="m1")


def _events(*ids: str, output: int = 10):
    items = [
        {"id": i, "tenant": "t1", "model": "m1", "time": "2026-03-02T10:00:00Z",
         "input_tokens": 5, "output_tokens": output}
        for i in ids
    ]  # fmt: skip
    events, errors = validate_events(items=items, now=NOW)
    assert not errors
    return events


def _stored_late(monkeypatch, *, output: int) -> list:
    """The first read of stored keys sees none, and the other writer's batch (e1, its
    payload with `output` tokens) is stored just after it: the read was stale."""
    read = store.stored_digests
    calls = []

    def stale(events):
        calls.append(len(events))
        if len(calls) == 1:
            usage_ingest(events=_events("e1", output=output), received_at=NOW)
            return {}
        return read(events)

    monkeypatch.setattr(store, "stored_digests", stale)
    return calls


def test_a_replay_stored_between_the_read_and_the_insert_is_a_duplicate(factory, monkeypatch):
    calls = _stored_late(monkeypatch, output=10)

    result = usage_ingest(events=_events("e1", "e2"), received_at=NOW)

    assert (result.accepted, result.duplicates) == (1, 1)
    assert sorted(EventKey.objects.values_list("event_id", flat=True)) == ["e1", "e2"]
    assert UsageEvent.objects.count() == 2
    assert calls == [2, 1, 2]  # before the lock, the other writer's own read, under the lock


def test_a_changed_payload_stored_between_the_read_and_the_insert_is_a_conflict(
    factory, monkeypatch
):
    _stored_late(monkeypatch, output=99)

    with pytest.raises(IngestConflict) as refused:
        usage_ingest(events=_events("e1", "e2"), received_at=NOW)

    assert refused.value.indexes == [0]
    assert list(EventKey.objects.values_list("event_id", flat=True)) == ["e1"]
    assert UsageEvent.objects.get().output_tokens == 99
