"""portal.bulk.rows_insert: rows written in one go read back through the ORM as written,
on PostgreSQL (COPY) and on SQLite (executemany)."""

import json
from datetime import UTC, datetime

import pytest
from django.db import connection

from metering.models import HourlyUsage
from metering.services.usage.rollup import ROLLUP_COLUMNS
from portal.bulk import rows_insert
from portal.models import Tenant
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.both_backends

HOUR = datetime(2026, 3, 2, 10, tzinfo=UTC)


def test_rows_inserted_in_one_go_read_back_as_written(db):
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    deployment = make_deployment()
    when = connection.ops.adapt_datetimefield_value
    columns = ("tenant_id", "deployment_id", "hour", *ROLLUP_COLUMNS)
    zero = dict.fromkeys(ROLLUP_COLUMNS, 0)
    rows = [
        {**zero, "hour": when(HOUR), "requests": 3, "ttft_ms_sum": 1234.5,
         "latency_histogram": json.dumps([1, 0, 2]), "is_demo": True},
        {**zero, "hour": when(HOUR.replace(hour=11)), "output_tokens": 10**12,
         "latency_histogram": "[]", "is_demo": False},
    ]  # fmt: skip
    rows_insert(
        HourlyUsage._meta.db_table,
        columns,
        [(tenant.pk, deployment.pk, *(row[c] for c in columns[2:])) for row in rows],
    )
    assert list(
        HourlyUsage.objects.order_by("hour").values_list(
            "tenant", "hour", "requests", "ttft_ms_sum", "output_tokens",
            "latency_histogram", "is_demo",
        )
    ) == [
        (tenant.pk, HOUR, 3, 1234.5, 0, [1, 0, 2], True),
        (tenant.pk, HOUR.replace(hour=11), 0, 0.0, 10**12, [], False),
    ]  # fmt: skip
