"""Rating is incremental: rated usage keeps, per tenant-hour, where its month's rating stands
(RatedHour), and holds realized amounts before promotions, the month's promotions being kept
per tenant-month. Rated usage is billing's read model of the rollups: it is cleared here and
rated again, whole, by the next run of the rate stage (queued for every tenant)."""

from datetime import UTC, datetime

import django.db.models.deletion
from django.db import migrations, models


def _clear(apps, schema_editor):
    apps.get_model("billing", "RatedUsage").objects.all().delete()
    apps.get_model("billing", "RatedTenantMonth").objects.all().delete()


def _rate_again(apps, schema_editor):
    """Last: PostgreSQL alters no table with a row's constraint checks still pending."""
    apps.get_model("billing", "RatingPending").objects.create(
        tenant=None, start=datetime(1970, 1, 1, tzinfo=UTC)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0004_rated_change_end"),
        ("portal", "0003_pipeline"),
    ]

    operations = [
        migrations.RunPython(_clear, migrations.RunPython.noop, elidable=True),
        migrations.RemoveField(
            model_name="ratedusage",
            name="promotions",
        ),
        migrations.AddField(
            model_name="ratedtenantmonth",
            name="credits_applied",
            field=models.JSONField(default=list),
        ),
        migrations.AddField(
            model_name="ratingpending",
            name="hours",
            field=models.BooleanField(default=True),
        ),
        migrations.AddField(
            model_name="ratedtenantmonth",
            name="quantities",
            field=models.JSONField(default=list),
        ),
        migrations.AddField(
            model_name="ratedtenantmonth",
            name="lines",
            field=models.JSONField(default=list),
        ),
        migrations.AddField(
            model_name="ratedtenantmonth",
            name="promotion_rate",
            field=models.DecimalField(decimal_places=30, default=0, max_digits=40),
        ),
        migrations.AddField(
            model_name="ratedtenantmonth",
            name="promotions",
            field=models.DecimalField(decimal_places=20, default=0, max_digits=40),
        ),
        migrations.AddField(
            model_name="ratedtenantmonth",
            name="realized",
            field=models.DecimalField(decimal_places=20, default=0, max_digits=40),
        ),
        migrations.AddField(
            model_name="ratedusage",
            name="tenant_month",
            field=models.ForeignKey(
                null=True,
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="usage",
                to="billing.ratedtenantmonth",
            ),
        ),
        migrations.AlterField(
            model_name="ratedusage",
            name="tenant_month",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="usage",
                to="billing.ratedtenantmonth",
            ),
        ),
        migrations.CreateModel(
            name="RatedHour",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("month_start", models.DateTimeField()),
                ("hour", models.DateTimeField()),
                ("consumed", models.BigIntegerField()),
                ("paid_tokens", models.BigIntegerField()),
                ("realized", models.DecimalField(decimal_places=20, max_digits=40)),
                ("quantities", models.JSONField()),
                ("cuts", models.JSONField(default=dict)),
                (
                    "tenant",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        to="portal.tenant",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("tenant", "hour"), name="rated_hour")
                ],
            },
        ),
        migrations.RunPython(_rate_again, migrations.RunPython.noop),
    ]
