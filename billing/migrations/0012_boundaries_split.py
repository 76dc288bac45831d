"""Boundaries split events, they never forfeit tokens (kpis.md section 3): the event that
crosses the free allowance or a volume tier is split there in whole tokens, and a paid part
holds its share of its event's SLO-compliant tokens, a fraction. Closed months keep the
rating they were closed with; the open months, from the end of the last closed month (every
month while none is), are rated again from their start by the next run of the rate stage."""

from datetime import UTC, datetime

from django.db import migrations, models


def _rate_open_months_again(apps, schema_editor):
    last = (
        apps.get_model("portal", "ClosedMonth")
        .objects.order_by("-month")
        .values_list("month", flat=True)
        .first()
    )
    if last is None:
        start = datetime(1970, 1, 1, tzinfo=UTC)
    else:
        last = last.astimezone(UTC)
        start = (
            last.replace(year=last.year + 1, month=1)
            if last.month == 12
            else last.replace(month=last.month + 1)
        )
    apps.get_model("billing", "RatingPending").objects.create(tenant=None, start=start)


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0011_contract_slo_target"),
        ("portal", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="ratedusage",
            name="compliant_cached_tokens",
            field=models.DecimalField(decimal_places=12, default=0, max_digits=30),
        ),
        migrations.AlterField(
            model_name="ratedusage",
            name="compliant_input_tokens",
            field=models.DecimalField(decimal_places=12, default=0, max_digits=30),
        ),
        migrations.AlterField(
            model_name="ratedusage",
            name="compliant_output_tokens",
            field=models.DecimalField(decimal_places=12, default=0, max_digits=30),
        ),
        migrations.RunPython(_rate_open_months_again, migrations.RunPython.noop),
    ]
