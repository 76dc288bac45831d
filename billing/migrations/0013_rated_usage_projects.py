"""Rated usage is kept per tenant's project (kpis.md 3e): rows carry the project's id, 0 for
the tenant's (none) (every row rated before, as every rollup row before), and a row is
unique per (tenant, deployment, hour, sale, project)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0012_boundaries_split'),
        ('metering', '0015_projects'),
        ('portal', '0011_projects'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='ratedusage',
            name='rated_usage_cell',
        ),
        migrations.AddField(
            model_name='ratedusage',
            name='project_id',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddConstraint(
            model_name='ratedusage',
            constraint=models.UniqueConstraint(fields=('tenant', 'deployment', 'hour', 'sale', 'project_id'), name='rated_usage_cell'),
        ),
    ]
