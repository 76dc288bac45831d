"""Token classes (kpis.md section 3): cache writes and reasoning tokens are priced classes,
at their parent's price (input, output) when they have none of their own, and an invoice
line says which class's price it used. Lines issued before say their own class (the only
price a line could use then). Rated usage keeps the classes' counts and keys its paid
quantities by price class too: it is cleared here and rated again, whole, by the next run
of the rate stage (queued for every tenant)."""

from datetime import UTC, datetime

from django.db import migrations, models


def _price_class_backfill(apps, schema_editor):
    """Invoice lines are append-only (a trigger on PostgreSQL): the guard steps aside for
    this one statement, inside the migration's transaction."""
    table = "billing_invoiceline"
    postgresql = schema_editor.connection.vendor == "postgresql"
    if postgresql:
        schema_editor.execute(
            f"ALTER TABLE {table} DISABLE TRIGGER billing_invoiceline_append_only"
        )
    schema_editor.execute(f"UPDATE {table} SET price_class = token_class WHERE token_class <> ''")
    if postgresql:
        schema_editor.execute(f"ALTER TABLE {table} ENABLE TRIGGER billing_invoiceline_append_only")


def _clear(apps, schema_editor):
    for name in ("RatedUsage", "RatedHour", "RatedTenantMonth"):
        apps.get_model("billing", name).objects.all().delete()


def _rate_again(apps, schema_editor):
    apps.get_model("billing", "RatingPending").objects.create(
        tenant=None, start=datetime(1970, 1, 1, tzinfo=UTC)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0005_incremental_rating"),
    ]

    operations = [
        migrations.RunPython(_clear, migrations.RunPython.noop, elidable=True),
        migrations.AddField(
            model_name="invoiceline",
            name="price_class",
            field=models.CharField(
                blank=True,
                choices=[
                    ("input", "input"),
                    ("cached_input", "cached_input"),
                    ("cache_write", "cache_write"),
                    ("output", "output"),
                    ("reasoning", "reasoning"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="ratedusage",
            name="cache_write_tokens",
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="ratedusage",
            name="reasoning_tokens",
            field=models.BigIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name="invoiceline",
            name="token_class",
            field=models.CharField(
                blank=True,
                choices=[
                    ("input", "input"),
                    ("cached_input", "cached_input"),
                    ("cache_write", "cache_write"),
                    ("output", "output"),
                    ("reasoning", "reasoning"),
                ],
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="price",
            name="token_class",
            field=models.CharField(
                choices=[
                    ("input", "input"),
                    ("cached_input", "cached_input"),
                    ("cache_write", "cache_write"),
                    ("output", "output"),
                    ("reasoning", "reasoning"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunPython(_price_class_backfill, migrations.RunPython.noop, elidable=True),
        migrations.RunPython(_rate_again, migrations.RunPython.noop),
    ]
