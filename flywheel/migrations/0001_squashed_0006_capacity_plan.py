"""Migrations 0001 to 0006 squashed (`replaces` them: a database that applied some of them
goes on with those that remain)."""

import django.db.models.deletion
import portal.periods
from decimal import Decimal
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    replaces = [('flywheel', '0001_initial'), ('flywheel', '0002_lever_scope_gpus_withdrawn'), ('flywheel', '0003_application_demand'), ('flywheel', '0004_forecast'), ('flywheel', '0005_counters'), ('flywheel', '0006_capacity_plan')]

    initial = True

    dependencies = [
        ('metering', '0010_five_minute_usage_slo_target'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='FactoryCosts',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('staff_per_month', models.DecimalField(decimal_places=4, max_digits=20)),
                ('sga_per_month', models.DecimalField(decimal_places=4, max_digits=20)),
                ('currency', models.CharField(max_length=3)),
                ('effective_from', models.DateTimeField(unique=True, validators=[portal.periods.validate_whole_hour])),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'verbose_name_plural': 'factory costs',
                'ordering': ['effective_from'],
                'constraints': [models.CheckConstraint(condition=models.Q(('staff_per_month__gte', 0), ('sga_per_month__gte', 0)), name='factory_costs_not_negative')],
            },
        ),
        migrations.CreateModel(
            name='Goal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('min_gross_margin', models.DecimalField(blank=True, decimal_places=6, max_digits=9, null=True)),
                ('min_ebitda_per_month', models.DecimalField(blank=True, decimal_places=4, max_digits=20, null=True)),
                ('min_tfi', models.DecimalField(blank=True, decimal_places=6, max_digits=9, null=True)),
                ('factor_targets', models.JSONField(blank=True, default=dict)),
                ('note', models.CharField(blank=True, max_length=200)),
                ('currency', models.CharField(max_length=3)),
                ('effective_from', models.DateTimeField(unique=True, validators=[portal.periods.validate_whole_hour])),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['effective_from'],
                'constraints': [models.CheckConstraint(condition=models.Q(('min_gross_margin__isnull', False), ('min_ebitda_per_month__isnull', False), ('min_tfi__isnull', False), _connector='OR'), name='goal_has_a_criterion')],
            },
        ),
        migrations.CreateModel(
            name='Cycle',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('period_start', models.DateTimeField()),
                ('period_end', models.DateTimeField()),
                ('ran_at', models.DateTimeField()),
                ('figures', models.JSONField(default=dict)),
                ('diagnosis', models.JSONField(default=list)),
                ('bottleneck', models.CharField(blank=True, max_length=32)),
                ('goal_check', models.JSONField(blank=True, default=list)),
                ('is_goal_met', models.BooleanField(null=True)),
                ('proposal', models.JSONField(blank=True, null=True)),
                ('error', models.TextField(blank=True)),
                ('goal', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='flywheel.goal')),
            ],
            options={
                'ordering': ['-period_start'],
                'constraints': [models.UniqueConstraint(fields=('period_start', 'period_end'), name='cycle_period')],
            },
        ),
        migrations.CreateModel(
            name='KpiSnapshot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('scope', models.CharField(max_length=64)),
                ('period_kind', models.CharField(choices=[('day', 'Day'), ('month', 'Month')], max_length=8)),
                ('period_start', models.DateTimeField()),
                ('period_end', models.DateTimeField()),
                ('telemetry', models.CharField(max_length=16)),
                ('values', models.JSONField()),
                ('sums', models.JSONField(blank=True, default=dict)),
                ('rating_errors', models.JSONField(blank=True, default=dict)),
                ('is_closed', models.BooleanField(default=False)),
                ('measured_at', models.DateTimeField()),
            ],
            options={
                'ordering': ['scope', 'period_kind', 'period_start'],
                'indexes': [models.Index(fields=['period_kind', 'period_start'], name='kpi_snapshot_time')],
                'constraints': [models.UniqueConstraint(fields=('scope', 'period_kind', 'period_start'), name='kpi_snapshot_key')],
            },
        ),
        migrations.CreateModel(
            name='Lever',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=64)),
                ('name', models.CharField(max_length=200)),
                ('description', models.TextField()),
                ('effects', models.JSONField()),
                ('one_time_cost', models.DecimalField(decimal_places=4, max_digits=20)),
                ('monthly_cost', models.DecimalField(decimal_places=4, max_digits=20)),
                ('currency', models.CharField(max_length=3)),
                ('is_active', models.BooleanField(default=True)),
                ('source', models.CharField(choices=[('published', 'published uplift'), ('operator', 'set by an operator'), ('learned', 'blended with realized uplift')], default='operator', max_length=16)),
                ('observations', models.PositiveIntegerField(default=0)),
                ('effective_from', models.DateTimeField(validators=[portal.periods.validate_whole_hour])),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('deployment', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='metering.deployment')),
                ('gpus_withdrawn', models.PositiveIntegerField(default=0)),
                ('pool', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='metering.pool')),
            ],
            options={
                'ordering': ['slug', 'effective_from'],
                'constraints': [models.UniqueConstraint(fields=('slug', 'effective_from'), name='lever_version_unique'), models.CheckConstraint(condition=models.Q(('one_time_cost__gte', 0), ('monthly_cost__gte', 0)), name='lever_costs_not_negative'), models.CheckConstraint(condition=models.Q(('pool__isnull', True), ('deployment__isnull', True), _connector='OR'), name='lever_one_scope')],
            },
        ),
        migrations.CreateModel(
            name='LeverApplication',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('applied_at', models.DateTimeField()),
                ('note', models.CharField(blank=True, max_length=200)),
                ('baseline_start', models.DateTimeField()),
                ('baseline_end', models.DateTimeField()),
                ('baseline_factors', models.JSONField(default=dict)),
                ('projected', models.JSONField(default=dict)),
                ('realized', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('evaluated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='evaluations', to='flywheel.cycle')),
                ('lever', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='applications', to='flywheel.lever')),
                ('updated_lever', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='flywheel.lever')),
                ('demand', models.CharField(choices=[('measured', 'measured demand'), ('unlimited', 'unlimited demand')], default='measured', max_length=16)),
            ],
            options={
                'ordering': ['-applied_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='Forecast',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('scope', models.CharField(max_length=140)),
                ('metric', models.CharField(choices=[('tokens', 'Tokens'), ('revenue', 'Revenue')], max_length=8)),
                ('method', models.CharField(choices=[('ets', 'Ets'), ('seasonal_naive_drift', 'Seasonal Naive Drift'), ('none', 'None')], max_length=24)),
                ('note', models.TextField(blank=True)),
                ('history_start', models.DateField()),
                ('history', models.JSONField(default=list)),
                ('forecast_start', models.DateField()),
                ('points', models.JSONField(default=list)),
                ('monthly', models.JSONField(default=list)),
                ('is_clipped', models.BooleanField(default=False)),
                ('mape', models.FloatField(null=True)),
                ('baseline_mape', models.FloatField(null=True)),
                ('origins', models.JSONField(default=list)),
                ('made_at', models.DateTimeField()),
            ],
            options={
                'ordering': ['scope', 'metric'],
                'constraints': [models.UniqueConstraint(fields=('scope', 'metric'), name='forecast_series')],
            },
        ),
        migrations.CreateModel(
            name='CounterMonth',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month', models.DateTimeField(unique=True)),
                ('until', models.DateTimeField()),
                ('counts', models.JSONField()),
                ('measured_at', models.DateTimeField()),
            ],
            options={
                'ordering': ['month'],
            },
        ),
        migrations.CreateModel(
            name='CounterValue',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100)),
                ('labels', models.CharField(max_length=500)),
                ('value', models.DecimalField(decimal_places=12, max_digits=40)),
            ],
            options={
                'ordering': ['name', 'labels'],
                'constraints': [models.UniqueConstraint(fields=('name', 'labels'), name='counter_value_series')],
            },
        ),
        migrations.CreateModel(
            name='CapacityPlan',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=8, unique=True)),
                ('made_at', models.DateTimeField()),
                ('body', models.JSONField()),
            ],
            options={
                'ordering': ['key'],
            },
        ),
        migrations.CreateModel(
            name='CostModel',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('capex_per_gpu', models.DecimalField(decimal_places=4, max_digits=20)),
                ('depreciation_months', models.PositiveIntegerField()),
                ('power_kw_per_gpu', models.DecimalField(decimal_places=6, max_digits=12)),
                ('idle_power_ratio', models.DecimalField(decimal_places=6, default=Decimal('0.3'), max_digits=7)),
                ('pue', models.DecimalField(decimal_places=4, max_digits=7)),
                ('electricity_price_per_kwh', models.DecimalField(decimal_places=10, max_digits=20)),
                ('hosting_per_gpu_month', models.DecimalField(decimal_places=4, max_digits=20)),
                ('network_storage_per_gpu_month', models.DecimalField(decimal_places=4, default=Decimal('0'), max_digits=20)),
                ('node_power_factor', models.DecimalField(decimal_places=4, default=Decimal('1.8'), max_digits=7)),
                ('currency', models.CharField(max_length=3)),
                ('effective_from', models.DateTimeField(validators=[portal.periods.validate_whole_hour])),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('pool', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='cost_models', to='metering.pool')),
                ('lead_time_months', models.PositiveIntegerField(default=3)),
            ],
            options={
                'ordering': ['pool__slug', 'effective_from'],
                'constraints': [models.UniqueConstraint(fields=('pool', 'effective_from'), name='cost_model_version_unique'), models.CheckConstraint(condition=models.Q(('depreciation_months__gt', 0)), name='cost_model_depreciation_positive'), models.CheckConstraint(condition=models.Q(('pue__gte', 1)), name='cost_model_pue_at_least_1'), models.CheckConstraint(condition=models.Q(('idle_power_ratio__gte', 0), ('idle_power_ratio__lte', 1)), name='cost_model_idle_power_ratio_0_to_1'), models.CheckConstraint(condition=models.Q(('capex_per_gpu__gte', 0), ('power_kw_per_gpu__gte', 0), ('electricity_price_per_kwh__gte', 0), ('hosting_per_gpu_month__gte', 0), ('network_storage_per_gpu_month__gte', 0), ('node_power_factor__gt', 0)), name='cost_model_amounts_not_negative')],
            },
        ),
    ]
