"""portal.bulk: rows written in one go read back through the ORM as written, on PostgreSQL
(COPY) and on SQLite (executemany, bulk_create)."""

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import connection

from billing.models import RatedTenantMonth
from metering.models import HourlyUsage
from metering.services.usage.rollup import ROLLUP_COLUMNS
from portal.bulk import prepared_cursor, rows_insert, rows_upsert
from portal.models import Tenant
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.both_backends

HOUR = datetime(2026, 3, 2, 10, tzinfo=UTC)


def test_rows_inserted_in_one_go_read_back_as_written(db):
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    deployment = make_deployment()
    when = connection.ops.adapt_datetimefield_value
    columns = ("tenant_id", "deployment_id", "service_tier", "hour", *ROLLUP_COLUMNS)
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
        [(tenant.pk, deployment.pk, "standard", *(row[c] for c in columns[3:])) for row in rows],
    )
    assert list(
        HourlyUsage.objects.order_by("hour").values_list(
            "tenant", "service_tier", "hour", "requests", "ttft_ms_sum", "output_tokens",
            "latency_histogram", "is_demo",
        )
    ) == [
        (tenant.pk, "standard", HOUR, 3, 1234.5, 0, [1, 0, 2], True),
        (tenant.pk, "standard", HOUR.replace(hour=11), 0, 0.0, 10**12, [], False),
    ]  # fmt: skip


def test_rows_upserted_insert_new_keys_and_update_only_the_fields_named(db):
    acme = Tenant.objects.create(slug="acme", name="Acme")
    globex = Tenant.objects.create(slug="globex", name="Globex")
    month, later = HOUR.replace(day=1, hour=0), HOUR.replace(day=2, hour=0)
    kept = RatedTenantMonth.objects.create(
        tenant=acme, month_start=month, currency="USD", usage_amount=Decimal("5"),
        lines=[{"old": True}], rated_at=HOUR,
    )  # fmt: skip
    quoted = [{"label": 'Llama "70B" \\ output', "amount": "1.2500"}]
    rows_upsert(
        RatedTenantMonth,
        [
            RatedTenantMonth(
                tenant=acme,
                month_start=month,
                currency="EUR",
                usage_amount=Decimal("12.3456"),
                lines=quoted,
                rated_at=later,
            ),
            RatedTenantMonth(
                tenant=globex,
                month_start=month,
                currency="USD",
                usage_amount=Decimal("0.0001"),
                credits_applied=[[7, "1", "1"]],
                rated_at=later,
            ),
        ],
        unique_fields=("tenant", "month_start"),
        update_fields=("usage_amount", "lines", "rated_at"),
    )
    rows = RatedTenantMonth.objects.order_by("tenant__slug").values_list(
        "pk", "tenant", "currency", "usage_amount", "lines", "credits_applied", "rated_at"
    )
    assert [row[1:] for row in rows] == [
        (acme.pk, "USD", Decimal("12.3456"), quoted, [], later),  # currency not named: kept
        (globex.pk, "USD", Decimal("0.0001"), [], [[7, "1", "1"]], later),
    ]
    assert rows[0][0] == kept.pk  # updated in place


@pytest.mark.postgres_only
def test_a_prepared_cursors_statement_is_prepared_once_and_logged(db):
    """Django opens connections with psycopg's preparing off, which ignored the cursor's
    `prepare=True`: its statement is now prepared at the first call, executed as prepared
    after, and Django's query log still reads it; Django's own cursor prepares nothing."""
    from django.test.utils import CaptureQueriesContext

    statement = "SELECT slug FROM portal_tenant WHERE slug IN (SELECT unnest(%s::text[]))"

    def prepared() -> list[tuple]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements "
                "WHERE NOT from_sql"
            )
            return cursor.fetchall()

    Tenant.objects.create(slug="acme", name="Acme")
    with CaptureQueriesContext(connection) as captured:
        for _ in range(3):
            with prepared_cursor() as cursor:
                cursor.execute(statement, [["acme", "other"]])
                assert cursor.fetchall() == [("acme",)]
        Tenant.objects.filter(slug="acme").exists()  # Django's own statement: not prepared
    text = statement.replace("%s", "$1")
    assert prepared() == [(text, 3)]
    assert [query["sql"] for query in captured.captured_queries][:3] == [text] * 3
    assert connection.connection.prepare_threshold is None  # as Django set it
