"""Billing's change log says where a tenant's rated usage stopped changing (`end`): the
measure stage measures those days again, not the rest of the month. Entries not yet read
keep the span they meant: to their month's end."""

from datetime import UTC

from django.db import migrations, models


def _month_ends(apps, schema_editor):
    RatedChange = apps.get_model("billing", "RatedChange")
    for change in RatedChange.objects.all():
        start = change.start.astimezone(UTC)
        year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
        change.end = start.replace(year=year, month=month, day=1, hour=0)
        change.save(update_fields=["end"])


class Migration(migrations.Migration):
    dependencies = [("billing", "0003_rated_change_log")]

    operations = [
        migrations.AddField(
            model_name="ratedchange", name="end", field=models.DateTimeField(null=True)
        ),
        migrations.RunPython(_month_ends, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name="ratedchange", name="end", field=models.DateTimeField()
        ),
    ]
