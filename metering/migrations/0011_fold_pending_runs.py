"""The fold's queue holds a run of ids per ingest transaction instead of a row per event;
key ids are handed out in blocks of EVENT_ID_BLOCK (one per batch) on PostgreSQL. Queued
events become runs of one."""

from django.db import migrations, models

from portal.migration_sql import postgresql_only

EVENT_ID_BLOCK = 10_000  # metering.services.usage.ingest.EVENT_ID_BLOCK when written


def runs_of_one(apps, schema_editor):
    FoldPending = apps.get_model("metering", "FoldPending")
    FoldPending.objects.update(last_id=models.F("first_id"), time_max=models.F("time_min"))


class Migration(migrations.Migration):
    dependencies = [("metering", "0010_five_minute_usage_slo_target")]

    operations = [
        migrations.RenameField("foldpending", "event_id", "first_id"),
        migrations.RenameField("foldpending", "time", "time_min"),
        migrations.AddField(
            "foldpending", "last_id", models.BigIntegerField(default=0), preserve_default=False
        ),
        migrations.AddField(
            "foldpending", "time_max", models.DateTimeField(null=True), preserve_default=False
        ),
        migrations.AddField(
            "foldpending", "events", models.PositiveIntegerField(default=1), preserve_default=False
        ),
        migrations.RunPython(runs_of_one, migrations.RunPython.noop, elidable=True),
        migrations.AlterField("foldpending", "time_max", models.DateTimeField()),
        postgresql_only(
            f"ALTER TABLE metering_eventkey ALTER COLUMN id SET INCREMENT BY {EVENT_ID_BLOCK}",
            "ALTER TABLE metering_eventkey ALTER COLUMN id SET INCREMENT BY 1",
        ),
    ]
