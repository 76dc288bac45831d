"""A tenant's projects (kpis.md 3e), an ingest token bound to one of them, and a tenant's
one rule of a kind per key (a budget per project and period: AlertRule.one_key; the budgets
stored before are the tenant's month ones, key "")."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('portal', '0010_cursor_until'),
    ]

    operations = [
        migrations.CreateModel(
            name='Project',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=64)),
                ('name', models.CharField(max_length=200)),
                ('cost_center', models.CharField(blank=True, max_length=100)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'ordering': ['tenant', 'slug'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='alertrule',
            name='alert_rule_one_per_tenant',
        ),
        migrations.AddField(
            model_name='alertrule',
            name='one_key',
            field=models.CharField(blank=True, default='', editable=False, max_length=200),
        ),
        migrations.AddConstraint(
            model_name='alertrule',
            constraint=models.UniqueConstraint(condition=models.Q(('one_per_tenant', True)), fields=('tenant', 'kind', 'one_key'), name='alert_rule_one_per_tenant_key'),
        ),
        migrations.AddField(
            model_name='project',
            name='tenant',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='projects', to='portal.tenant'),
        ),
        migrations.AddField(
            model_name='apitoken',
            name='bound_project',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='bound_tokens', to='portal.project'),
        ),
        migrations.AddConstraint(
            model_name='project',
            constraint=models.UniqueConstraint(fields=('tenant', 'slug'), name='project_slug_in_tenant'),
        ),
    ]
