"""Retention: the raw events of a closed month past the retention window are archived to
Parquet, checked and dropped; every figure read from the read models stays the same.

The world: tenant A used llama-70b on h100-a on 3 and 10 March 2026 (20 M input, 20 M output
tokens) and on 2 April; March was closed (its invoice issued), April was not. At the clock
of 16 June 2027 the retention window starts on 1 May 2026 (13 months before June): March
and April are past it."""

import hashlib
import json
import shutil
from datetime import UTC, datetime
from decimal import Decimal

import pyarrow.parquet as pq
import pytest
from django.db import connection

from billing.models import Invoice, RatedUsage
from billing.services.close import close_run
from billing.services.rating import rated_usage_update, rating_queue
from flywheel.selectors.kpis import period_measure
from metering.models import EventKey, IncompleteRawMonth, UsageEvent
from metering.services.usage.archive import ArchiveMismatch, archive_verify, manifest
from metering.services.usage.changes import raw_months_complete_check
from metering.tasks import retention_task
from portal.clock import clock_set
from portal.errors import FieldError
from portal.models import AuditEntry
from tests.billing.factories import APRIL, MARCH, M, make_march_usage, make_priced_model, post_usage

pytestmark = pytest.mark.both_backends

LATER = datetime(2027, 6, 16, 10, 0, tzinfo=UTC)


@pytest.fixture
def archived(admin_api, tenant_a, settings, tmp_path):
    settings.USAGE_ARCHIVE_DIR = tmp_path
    make_priced_model()
    make_march_usage(admin_api, tenant_a, "a1", discount_pct=Decimal(25))
    post_usage(admin_api, [
        {"id": "a2", "time": "2026-03-10T05:30:00Z", "input_tokens": 10 * M,
         "output_tokens": 10 * M},
        {"id": "a3", "time": "2026-04-02T00:00:00Z", "input_tokens": M, "output_tokens": M},
    ])  # fmt: skip
    close_run(month_start=MARCH)
    before = _figures()
    clock_set(LATER)
    retention_task()
    return before


def _figures() -> dict:
    """What pages, the API and invoices read of March: KPIs, invoices, rated usage."""
    kpis = period_measure(start=MARCH, end=APRIL).factory
    return {
        "kpis": (kpis.output_tokens, kpis.tef, kpis.realized_revenue),
        "invoices": sorted(Invoice.objects.values_list("number", "total")),
        "rated": sorted(
            RatedUsage.objects.values_list("hour", "sale", "output_tokens", "realized")
        ),
    }


def test_a_closed_month_past_retention_is_archived_checked_and_dropped(archived, tmp_path):
    path = tmp_path / "usage-events-2026-03.parquet"
    entry = manifest()["usage-events-2026-03.parquet"]
    table = pq.read_table(path).to_pydict()

    assert entry["month"] == "2026-03" and entry["rows"] == 2
    assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest()
    assert table["event_id"] == ["a1", "a2"] and table["source"] == ["default", "default"]
    assert table["tenant"] == ["tenant-a"] * 2 and table["deployment"] == ["llama-70b@h100-a"] * 2
    assert (sum(table["input_tokens"]), sum(table["output_tokens"])) == (20 * M, 20 * M)
    assert table["time"][1] == datetime(2026, 3, 10, 5, 30, tzinfo=UTC)
    # Gone from the database, keys included; April (not closed) kept.
    assert not UsageEvent.objects.filter(time__lt=APRIL).exists()
    assert list(EventKey.objects.values_list("event_id", flat=True)) == ["a3"]
    assert UsageEvent.objects.count() == 1
    assert list(IncompleteRawMonth.objects.values_list("pool__slug", "month", "reason")) == [
        ("h100-a", MARCH, "archived")
    ]
    assert AuditEntry.objects.filter(action="usage.archive", object_id="2026-03").exists()
    if connection.vendor == "postgresql":  # the month's partition itself is dropped
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('metering_usageevent_p202603')")
            assert cursor.fetchone() == (None,)


def test_every_figure_of_the_archived_month_is_unchanged(archived, caplog):
    assert _figures() == archived
    assert archived["kpis"][0] == 20 * M  # output tokens metered in March
    # Asked to rate March again, the rate stage keeps its rated usage: its events are gone.
    rating_queue(start=MARCH)
    rated_usage_update()
    assert _figures() == archived
    assert "the raw events of 2026-03 are archived" in caplog.text


def test_the_job_again_archives_nothing_more_and_refolds_are_refused(archived, tmp_path):
    path = tmp_path / "usage-events-2026-03.parquet"
    written = path.read_bytes()

    retention_task()

    assert path.read_bytes() == written and len(manifest()) == 1
    with pytest.raises(FieldError) as refused:
        raw_months_complete_check(
            pool=IncompleteRawMonth.objects.get().pool, start=MARCH, end=APRIL,
            field="effective_from",
        )  # fmt: skip
    assert refused.value.field == "effective_from" and "raw events archived" in str(
        refused.value.message
    )


def test_an_archive_that_does_not_read_back_as_written_is_refused(archived, tmp_path):
    path = tmp_path / "usage-events-2026-03.parquet"
    entry = manifest()[path.name]
    copy = tmp_path / "copy.parquet"
    shutil.copy(path, copy)
    archive_verify(copy, rows=2, sha256=entry["sha256"], sums={"output_tokens": 20 * M})

    with pytest.raises(ArchiveMismatch, match="2 rows, the database has 3"):
        archive_verify(copy, rows=3, sha256=entry["sha256"])
    with pytest.raises(ArchiveMismatch, match="output_tokens sums to 20000000, not 1"):
        archive_verify(copy, rows=2, sha256=entry["sha256"], sums={"output_tokens": 1})
    data = bytearray(copy.read_bytes())
    data[100] ^= 0xFF
    copy.write_bytes(bytes(data))
    with pytest.raises(ArchiveMismatch, match="SHA-256"):
        archive_verify(copy, rows=2, sha256=entry["sha256"])
