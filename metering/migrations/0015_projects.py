"""Usage is kept per tenant's project (kpis.md 3e): events, rollups and the fold's deltas
carry the project's id, 0 for the tenant's (none) (every row stored before), and a rollup
row is unique per (tenant, deployment, period, project)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('metering', '0014_rollup_delta'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='dailyusage',
            name='daily_unique',
        ),
        migrations.RemoveConstraint(
            model_name='hourlyusage',
            name='hourly_unique',
        ),
        migrations.AddField(
            model_name='dailyusage',
            name='project_id',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='hourlyusage',
            name='project_id',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='rollupdelta',
            name='project_id',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='usageevent',
            name='project_id',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddConstraint(
            model_name='dailyusage',
            constraint=models.UniqueConstraint(fields=('tenant', 'deployment', 'day', 'project_id'), name='daily_unique'),
        ),
        migrations.AddConstraint(
            model_name='hourlyusage',
            constraint=models.UniqueConstraint(fields=('tenant', 'deployment', 'hour', 'project_id'), name='hourly_unique'),
        ),
    ]
