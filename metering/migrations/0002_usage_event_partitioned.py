"""The usage event table, created by hand: on PostgreSQL it is partitioned by month of `time`
(RANGE, primary key (id, time)); ingestion creates the monthly partitions on demand. Its
indexes are the model's usage_cell_idx and a BRIN index on `time`; `requests` defaults to 1
in the database too (db_default), for writers that leave it out (COPY).

Other databases: a plain table made from the model."""

import django.db.models.deletion
from django.db import migrations, models

PARTITIONED_TABLE = """
CREATE TABLE metering_usageevent (
    id bigint NOT NULL,
    time timestamp with time zone NOT NULL,
    tenant_id bigint NOT NULL,
    deployment_id bigint NOT NULL,
    input_tokens bigint NOT NULL,
    cached_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    ttft_ms double precision NULL,
    tpot_ms double precision NULL,
    latency_ms double precision NULL,
    is_error boolean NOT NULL,
    requests integer DEFAULT 1 NOT NULL CHECK (requests >= 0),
    PRIMARY KEY (id, time)
) PARTITION BY RANGE (time);
CREATE INDEX usage_cell_idx ON metering_usageevent (tenant_id, deployment_id, time);
CREATE INDEX usage_time_brin ON metering_usageevent USING brin (time);
"""


def create_usage_event_table(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PARTITIONED_TABLE)
    else:
        schema_editor.create_model(apps.get_model("metering", "UsageEvent"))


def drop_usage_event_table(apps, schema_editor):
    schema_editor.execute("DROP TABLE metering_usageevent")


class Migration(migrations.Migration):
    dependencies = [
        ("metering", "0001_initial"),
        ("portal", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="UsageEvent",
                    fields=[
                        ("id", models.BigIntegerField(primary_key=True, serialize=False)),
                        ("time", models.DateTimeField()),
                        ("input_tokens", models.BigIntegerField()),
                        ("cached_tokens", models.BigIntegerField()),
                        ("output_tokens", models.BigIntegerField()),
                        ("ttft_ms", models.FloatField(null=True)),
                        ("tpot_ms", models.FloatField(null=True)),
                        ("latency_ms", models.FloatField(null=True)),
                        ("is_error", models.BooleanField(default=False)),
                        ("deployment", models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, to="metering.deployment")),
                        ("tenant", models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, to="portal.tenant")),
                        ("requests", models.PositiveIntegerField(db_default=1, default=1)),
                    ],
                    options={
                        "indexes": [models.Index(fields=["tenant", "deployment", "time"], name="usage_cell_idx")],
                    },
                ),
            ],
        ),
        migrations.RunPython(create_usage_event_table, drop_usage_event_table),
    ]
