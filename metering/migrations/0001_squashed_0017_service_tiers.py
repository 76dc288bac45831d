"""Migrations 0001 to 0017 squashed (`replaces` them: a database that applied some of them
goes on with those that remain). Left out: the data migrations of 0004 and 0011 (elidable),
whose rows cannot exist yet where this migration runs. Last, in the order the originals ran
them: the usage event table (0002, partitioned on PostgreSQL), the fold's queue (0004,
whose columns 0011 renames in place: the order of its columns is the originals' on
PostgreSQL and on SQLite) with the operations since on either, the key ids' blocks (0011)
and the event table's BRIN index (0013), so that the schema operations before them fold
into their models' CreateModel."""

import django.db.models.deletion
import metering.models.telemetry
import portal.periods
from decimal import Decimal
from django.conf import settings
from django.db import migrations, models

from portal.migration_sql import postgresql_only

# 0002_usage_event_partitioned
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



# 0011_fold_pending_runs
EVENT_ID_BLOCK = 10_000  # metering.services.usage.ingest.EVENT_ID_BLOCK when written

# 0013_usage_event_brin
BRIN_FORWARD = """
ALTER TABLE metering_usageevent DROP CONSTRAINT IF EXISTS metering_usageevent_pkey;
DROP INDEX IF EXISTS usage_cell_idx;
DROP INDEX IF EXISTS usage_time_brin;
CREATE INDEX usage_id_time_brin ON metering_usageevent USING brin (id, time)
    WITH (autosummarize = on);
"""

BRIN_BACKWARD = """
DROP INDEX IF EXISTS usage_id_time_brin;
CREATE INDEX usage_time_brin ON metering_usageevent USING brin (time);
CREATE INDEX usage_cell_idx ON metering_usageevent (tenant_id, deployment_id, time);
ALTER TABLE metering_usageevent ADD PRIMARY KEY (id, time);
"""


class Migration(migrations.Migration):

    replaces = [('metering', '0001_initial'), ('metering', '0002_usage_event_partitioned'), ('metering', '0003_changed_hour'), ('metering', '0004_fold_adds'), ('metering', '0005_token_classes'), ('metering', '0006_ingestion_debugger'), ('metering', '0007_telemetry_dynamo'), ('metering', '0008_otlp_metrics'), ('metering', '0009_pool_service_life_whole_hours'), ('metering', '0010_five_minute_usage_slo_target'), ('metering', '0011_fold_pending_runs'), ('metering', '0012_usagechange_capacity_pool'), ('metering', '0013_usage_event_brin'), ('metering', '0014_rollup_delta'), ('metering', '0015_projects'), ('metering', '0016_reference_curves'), ('metering', '0017_service_tiers')]

    initial = True

    dependencies = [
        ('portal', '0008_alert_rule_kinds_registered'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Deployment',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=150, unique=True)),
            ],
            options={
                'ordering': ['slug'],
            },
        ),
        migrations.CreateModel(
            name='FoldMark',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('completed_at', models.DateTimeField()),
            ],
        ),
        migrations.CreateModel(
            name='ServedModel',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=100, unique=True)),
                ('name', models.CharField(max_length=200)),
            ],
            options={
                'ordering': ['slug'],
            },
        ),
        migrations.CreateModel(
            name='EventKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('source', models.CharField(max_length=128)),
                ('event_id', models.CharField(max_length=128)),
                ('payload_hash', models.CharField(max_length=32)),
                ('received_at', models.DateTimeField()),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('source', 'event_id'), name='event_key_unique')],
            },
        ),
        migrations.CreateModel(
            name='Incident',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('title', models.CharField(max_length=200)),
                ('severity', models.CharField(choices=[('sev1', 'SEV1'), ('sev2', 'SEV2'), ('sev3', 'SEV3'), ('sev4', 'SEV4')], max_length=8)),
                ('impact', models.CharField(choices=[('major_outage', 'Major outage'), ('partial_outage', 'Partial outage'), ('degraded', 'Degraded performance')], max_length=16)),
                ('status', models.CharField(choices=[('investigating', 'Investigating'), ('identified', 'Identified'), ('monitoring', 'Monitoring'), ('resolved', 'Resolved')], default='investigating', max_length=16)),
                ('started_at', models.DateTimeField()),
                ('resolved_at', models.DateTimeField(blank=True, null=True)),
                ('cause', models.TextField(blank=True)),
                ('remediation', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('deployments', models.ManyToManyField(blank=True, related_name='incidents', to='metering.deployment')),
                ('tenants', models.ManyToManyField(blank=True, related_name='incidents', to='portal.tenant')),
            ],
            options={
                'ordering': ['-started_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='IncidentUpdate',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('time', models.DateTimeField()),
                ('status', models.CharField(choices=[('investigating', 'Investigating'), ('identified', 'Identified'), ('monitoring', 'Monitoring'), ('resolved', 'Resolved')], max_length=16)),
                ('impact', models.CharField(blank=True, choices=[('major_outage', 'Major outage'), ('partial_outage', 'Partial outage'), ('degraded', 'Degraded performance')], default='', max_length=16)),
                ('message', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('incident', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='updates', to='metering.incident')),
            ],
            options={
                'ordering': ['incident', 'time', 'id'],
            },
        ),
        migrations.CreateModel(
            name='Pool',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=64, unique=True)),
                ('name', models.CharField(max_length=200)),
                ('gpu_type', models.CharField(max_length=64)),
                ('gpu_count', models.PositiveIntegerField(help_text='Installed GPUs when no telemetry says otherwise.')),
                ('site', models.CharField(blank=True, max_length=100)),
                ('in_service_from', models.DateTimeField(blank=True, null=True)),
                ('retired_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'ordering': ['slug'],
                'constraints': [models.CheckConstraint(condition=models.Q(('retired_at__isnull', True), ('in_service_from__isnull', True), ('retired_at__gt', models.F('in_service_from')), _connector='OR'), name='pool_retired_after_in_service')],
            },
        ),
        migrations.AddField(
            model_name='incident',
            name='pools',
            field=models.ManyToManyField(blank=True, related_name='incidents', to='metering.pool'),
        ),
        migrations.AddField(
            model_name='deployment',
            name='pool',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='deployments', to='metering.pool'),
        ),
        migrations.CreateModel(
            name='ModelAlias',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('alias', models.CharField(max_length=200, unique=True)),
                ('model', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='aliases', to='metering.servedmodel')),
            ],
        ),
        migrations.AddField(
            model_name='deployment',
            name='model',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='deployments', to='metering.servedmodel'),
        ),
        migrations.CreateModel(
            name='EngineHourly',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('hour', models.DateTimeField()),
                ('intervals', models.PositiveIntegerField(default=0)),
                ('prompt_tokens', models.BigIntegerField(default=0)),
                ('generation_tokens', models.BigIntegerField(default=0)),
                ('cached_prompt_tokens', models.BigIntegerField(default=0)),
                ('requests', models.BigIntegerField(default=0)),
                ('aborted_requests', models.BigIntegerField(default=0)),
                ('requests_by_reason', models.JSONField(default=dict)),
                ('ttft_histogram', models.JSONField(default=dict)),
                ('tpot_histogram', models.JSONField(default=dict)),
                ('tpot_family', models.CharField(blank=True, max_length=100)),
                ('gauges', models.JSONField(default=dict)),
                ('running_requests', models.FloatField(null=True)),
                ('waiting_requests', models.FloatField(null=True)),
                ('kv_cache_usage', models.FloatField(null=True)),
                ('last_observed_at', models.DateTimeField(null=True)),
                ('deployment', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='engine_hours', to='metering.deployment')),
            ],
            options={
                'ordering': ['deployment', 'hour'],
                'indexes': [models.Index(fields=['hour'], name='engine_hourly_hour_idx')],
                'constraints': [models.UniqueConstraint(fields=('deployment', 'hour'), name='engine_hourly_unique')],
            },
        ),
        migrations.CreateModel(
            name='MaintenanceWindow',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('title', models.CharField(max_length=200)),
                ('description', models.TextField(blank=True)),
                ('starts_at', models.DateTimeField()),
                ('ends_at', models.DateTimeField()),
                ('announced_at', models.DateTimeField()),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('deployments', models.ManyToManyField(blank=True, related_name='maintenance_windows', to='metering.deployment')),
                ('pools', models.ManyToManyField(blank=True, related_name='maintenance_windows', to='metering.pool')),
            ],
            options={
                'ordering': ['starts_at', 'id'],
                'constraints': [models.CheckConstraint(condition=models.Q(('ends_at__gt', models.F('starts_at'))), name='maintenance_ends_after_start'), models.CheckConstraint(condition=models.Q(('announced_at__lt', models.F('starts_at'))), name='maintenance_announced_in_advance')],
            },
        ),
        migrations.AddIndex(
            model_name='incident',
            index=models.Index(fields=['started_at'], name='incident_started_idx'),
        ),
        migrations.AddConstraint(
            model_name='incident',
            constraint=models.CheckConstraint(condition=models.Q(('resolved_at__isnull', True), ('resolved_at__gte', models.F('started_at')), _connector='OR'), name='incident_resolved_after_start'),
        ),
        migrations.AddConstraint(
            model_name='incident',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('resolved_at__isnull', False), ('status', 'resolved')), models.Q(models.Q(('status', 'resolved'), _negated=True), ('resolved_at__isnull', True)), _connector='OR'), name='incident_resolved_status_matches'),
        ),
        migrations.CreateModel(
            name='GpuHourly',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('hour', models.DateTimeField()),
                ('gpu_key', models.CharField(max_length=200)),
                ('gpu', models.CharField(blank=True, max_length=16)),
                ('uuid', models.CharField(blank=True, max_length=100)),
                ('model_name', models.CharField(blank=True, max_length=100)),
                ('hostname', models.CharField(blank=True, max_length=200)),
                ('pod', models.CharField(blank=True, max_length=200)),
                ('namespace', models.CharField(blank=True, max_length=200)),
                ('samples', models.PositiveIntegerField(default=0)),
                ('utilisation_samples', models.PositiveIntegerField(default=0)),
                ('utilisation_pct_sum', models.FloatField(default=0)),
                ('power_samples', models.PositiveIntegerField(default=0)),
                ('power_w_sum', models.FloatField(default=0)),
                ('energy_j', models.DecimalField(decimal_places=3, default=0, max_digits=20)),
                ('xid_last_code', models.IntegerField(null=True)),
                ('xid_changes', models.PositiveIntegerField(default=0)),
                ('last_observed_at', models.DateTimeField(null=True)),
                ('pool', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='gpu_hours', to='metering.pool')),
            ],
            options={
                'ordering': ['pool', 'hour', 'gpu_key'],
                'indexes': [models.Index(fields=['hour'], name='gpu_hourly_hour_idx')],
                'constraints': [models.UniqueConstraint(fields=('pool', 'hour', 'gpu_key'), name='gpu_hourly_unique')],
            },
        ),
        migrations.CreateModel(
            name='CapacitySample',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('time', models.DateTimeField()),
                ('interval_s', models.PositiveIntegerField(blank=True, null=True)),
                ('gpus_installed', models.PositiveIntegerField()),
                ('gpus_healthy', models.PositiveIntegerField()),
                ('gpus_busy', models.PositiveIntegerField()),
                ('power_w', models.DecimalField(blank=True, decimal_places=3, max_digits=14, null=True)),
                ('pool', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='capacity_samples', to='metering.pool')),
            ],
            options={
                'ordering': ['pool', 'time'],
                'constraints': [models.UniqueConstraint(fields=('pool', 'time'), name='capacity_pool_time_unique'), models.CheckConstraint(condition=models.Q(('gpus_healthy__lte', models.F('gpus_installed')), ('gpus_busy__lte', models.F('gpus_healthy'))), name='capacity_busy_le_healthy_le_installed')],
            },
        ),
        migrations.AddConstraint(
            model_name='deployment',
            constraint=models.UniqueConstraint(fields=('model', 'pool'), name='deployment_model_pool_unique'),
        ),
        migrations.CreateModel(
            name='RefoldPending',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('start', models.DateTimeField()),
                ('end', models.DateTimeField(null=True)),
                ('deployment', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, to='metering.deployment')),
            ],
        ),
        migrations.CreateModel(
            name='IncompleteRawMonth',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month', models.DateTimeField()),
                ('reason', models.CharField(choices=[('loaded', 'loaded as rollups'), ('archived', 'raw events archived')], max_length=16)),
                ('pool', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='metering.pool')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('pool', 'month'), name='incomplete_raw_month')],
            },
        ),
        migrations.CreateModel(
            name='IngestRejection',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(db_index=True)),
                ('path', models.CharField(max_length=100)),
                ('token_prefix', models.CharField(blank=True, max_length=16)),
                ('source', models.CharField(blank=True, max_length=128)),
                ('status', models.PositiveSmallIntegerField()),
                ('received', models.PositiveIntegerField(default=0)),
                ('rejected', models.PositiveIntegerField(default=0)),
                ('errors', models.JSONField(default=list)),
            ],
            options={
                'ordering': ['-at', '-pk'],
            },
        ),
        migrations.CreateModel(
            name='SourceSeen',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('source', models.CharField(max_length=128)),
                ('last_event_at', models.DateTimeField()),
                ('last_received_at', models.DateTimeField()),
                ('deployment', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, to='metering.deployment')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('source', 'deployment'), name='source_seen_unique')],
            },
        ),
        migrations.CreateModel(
            name='ScrapeTarget',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('url', models.CharField(max_length=500, unique=True, validators=[metering.models.telemetry.validate_scrape_url])),
                ('kind', models.CharField(choices=[('vllm', 'vLLM'), ('sglang', 'SGLang'), ('dynamo', 'Dynamo'), ('dcgm', 'dcgm-exporter')], max_length=8)),
                ('enabled', models.BooleanField(default=True)),
                ('timeout_s', models.PositiveSmallIntegerField(default=5)),
                ('last_scraped_at', models.DateTimeField(blank=True, editable=False, null=True)),
                ('last_status', models.CharField(choices=[('never', 'never scraped'), ('ok', 'ok'), ('failed', 'failed')], default='never', editable=False, max_length=8)),
                ('last_error', models.TextField(blank=True, editable=False)),
                ('consecutive_failures', models.PositiveIntegerField(default=0, editable=False)),
                ('last_skipped', models.JSONField(blank=True, default=list, editable=False)),
                ('last_unknown_models', models.JSONField(blank=True, default=list, editable=False)),
                ('state', models.JSONField(blank=True, default=dict, editable=False)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('deployment', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='scrape_targets', to='metering.deployment')),
                ('pool', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='scrape_targets', to='metering.pool')),
            ],
            options={
                'ordering': ['pool', 'url'],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('kind', 'dcgm'), _negated=True), ('deployment__isnull', True), _connector='OR'), name='scrape_target_dcgm_has_no_deployment'), models.CheckConstraint(condition=models.Q(('timeout_s__gte', 1), ('timeout_s__lte', 20)), name='scrape_target_timeout_1_to_20_s')],
            },
        ),
        migrations.CreateModel(
            name='TelemetryPushState',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('vllm', 'vLLM'), ('sglang', 'SGLang'), ('dynamo', 'Dynamo'), ('dcgm', 'dcgm-exporter')], max_length=8)),
                ('source', models.CharField(default='default', max_length=128)),
                ('state', models.JSONField(blank=True, default=dict)),
                ('last_pushed_at', models.DateTimeField(blank=True, null=True)),
                ('pool', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='telemetry_push_states', to='metering.pool')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('pool', 'kind', 'source'), name='telemetry_push_state_unique')],
            },
        ),
        migrations.CreateModel(
            name='OtlpMetricState',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('source', models.CharField(max_length=128, unique=True)),
                ('state', models.JSONField(default=dict)),
            ],
        ),
        migrations.CreateModel(
            name='OtlpHourly',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('hour', models.DateTimeField()),
                ('source', models.CharField(max_length=128)),
                ('input_tokens', models.BigIntegerField(default=0)),
                ('output_tokens', models.BigIntegerField(default=0)),
                ('points', models.PositiveIntegerField(default=0)),
                ('ttft_histogram', models.JSONField(default=dict)),
                ('tpot_histogram', models.JSONField(default=dict)),
                ('last_observed_at', models.DateTimeField(null=True)),
                ('deployment', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='otlp_hours', to='metering.deployment')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('deployment', 'hour', 'source'), name='otlp_hourly_unique')],
            },
        ),
        migrations.AlterField(
            model_name='pool',
            name='in_service_from',
            field=models.DateTimeField(blank=True, null=True, validators=[portal.periods.validate_whole_hour]),
        ),
        migrations.AlterField(
            model_name='pool',
            name='retired_at',
            field=models.DateTimeField(blank=True, null=True, validators=[portal.periods.validate_whole_hour]),
        ),
        migrations.CreateModel(
            name='UsageChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('usage', 'Usage'), ('capacity', 'Capacity'), ('version', 'Version')], max_length=16)),
                ('start', models.DateTimeField()),
                ('end', models.DateTimeField(null=True)),
                ('pool', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, to='metering.pool')),
                ('tenant', models.ForeignKey(db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, to='portal.tenant')),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('kind', 'capacity')), fields=['pool', 'id'], name='usagechange_capacity_pool')],
            },
        ),
        migrations.CreateModel(
            name='ReferenceCurvePoint',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('gpu_type', models.CharField(max_length=64)),
                ('tp', models.PositiveIntegerField()),
                ('precision', models.CharField(max_length=32)),
                ('concurrency', models.PositiveIntegerField()),
                ('tok_s_per_gpu', models.DecimalField(decimal_places=6, max_digits=20)),
                ('tok_s_per_user', models.DecimalField(decimal_places=6, max_digits=20)),
                ('token_basis', models.CharField(choices=[('output', 'Output'), ('total', 'Total')], max_length=8)),
                ('isl', models.PositiveIntegerField()),
                ('osl', models.PositiveIntegerField()),
                ('ttft_p50_ms', models.DecimalField(blank=True, decimal_places=6, max_digits=20, null=True)),
                ('source', models.CharField(blank=True, max_length=200)),
                ('model', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='curve_points', to='metering.servedmodel')),
            ],
            options={
                'ordering': ['model', 'gpu_type', 'tp', 'precision', 'concurrency'],
                'constraints': [models.UniqueConstraint(fields=('model', 'gpu_type', 'tp', 'precision', 'concurrency'), name='curve_point_unique'), models.CheckConstraint(condition=models.Q(('tok_s_per_gpu__gt', 0), ('tok_s_per_user__gt', 0), ('tp__gt', 0)), name='curve_point_rates_positive')],
            },
        ),
        migrations.CreateModel(
            name='DeploymentVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('effective_from', models.DateTimeField(validators=[portal.periods.validate_whole_hour])),
                ('r_ref', models.DecimalField(decimal_places=4, max_digits=14)),
                ('w_in', models.DecimalField(decimal_places=6, default=0, max_digits=8)),
                ('slo_ttft_ms', models.PositiveIntegerField(blank=True, null=True)),
                ('slo_tpot_ms', models.PositiveIntegerField(blank=True, null=True)),
                ('slo_min_tokens_per_s', models.PositiveIntegerField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('deployment', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='metering.deployment')),
                ('slo_target', models.DecimalField(decimal_places=5, default=Decimal('0.99'), max_digits=6)),
                ('r_ref_derivation', models.TextField(blank=True, default='')),
                ('slo_tpot_ms_priority', models.PositiveIntegerField(blank=True, null=True)),
                ('slo_ttft_ms_priority', models.PositiveIntegerField(blank=True, null=True)),
            ],
            options={
                'ordering': ['deployment', 'effective_from'],
                'constraints': [models.UniqueConstraint(fields=('deployment', 'effective_from'), name='deployment_version_unique'), models.CheckConstraint(condition=models.Q(('r_ref__gt', 0)), name='r_ref_positive'), models.CheckConstraint(condition=models.Q(('w_in__gte', 0)), name='w_in_non_negative'), models.CheckConstraint(condition=models.Q(('slo_target__gt', 0), ('slo_target__lt', 1)), name='slo_target_range')],
            },
        ),
        migrations.CreateModel(
            name='FiveMinuteUsage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('bucket', models.DateTimeField()),
                ('requests', models.BigIntegerField(default=0)),
                ('compliant_requests', models.BigIntegerField(default=0)),
                ('errors', models.BigIntegerField(default=0)),
                ('deployment', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, to='metering.deployment')),
                ('tenant', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, to='portal.tenant')),
                ('ok_cached_tokens', models.BigIntegerField(default=0)),
                ('ok_input_tokens', models.BigIntegerField(default=0)),
                ('ok_output_tokens', models.BigIntegerField(default=0)),
            ],
            options={
                'indexes': [models.Index(fields=['bucket'], name='five_minute_bucket_idx')],
                'constraints': [models.UniqueConstraint(fields=('tenant', 'deployment', 'bucket'), name='five_minute_unique')],
            },
        ),
        migrations.CreateModel(
            name='RollupDelta',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('requests', models.BigIntegerField(default=0)),
                ('errors', models.BigIntegerField(default=0)),
                ('input_tokens', models.BigIntegerField(default=0)),
                ('cached_tokens', models.BigIntegerField(default=0)),
                ('cache_write_tokens', models.BigIntegerField(default=0)),
                ('output_tokens', models.BigIntegerField(default=0)),
                ('reasoning_tokens', models.BigIntegerField(default=0)),
                ('ok_input_tokens', models.BigIntegerField(default=0)),
                ('ok_cached_tokens', models.BigIntegerField(default=0)),
                ('ok_cache_write_tokens', models.BigIntegerField(default=0)),
                ('ok_output_tokens', models.BigIntegerField(default=0)),
                ('ok_reasoning_tokens', models.BigIntegerField(default=0)),
                ('compliant_requests', models.BigIntegerField(default=0)),
                ('compliant_input_tokens', models.BigIntegerField(default=0)),
                ('compliant_cached_tokens', models.BigIntegerField(default=0)),
                ('compliant_output_tokens', models.BigIntegerField(default=0)),
                ('ttft_ms_sum', models.FloatField(default=0)),
                ('ttft_count', models.BigIntegerField(default=0)),
                ('tpot_ms_sum', models.FloatField(default=0)),
                ('tpot_count', models.BigIntegerField(default=0)),
                ('latency_ms_sum', models.FloatField(default=0)),
                ('latency_count', models.BigIntegerField(default=0)),
                ('latency_histogram', models.JSONField(default=list)),
                ('is_demo', models.BooleanField(default=False)),
                ('hour', models.DateTimeField()),
                ('change', models.BigIntegerField()),
                ('deployment', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='metering.deployment')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='portal.tenant')),
                ('project_id', models.BigIntegerField(db_default=0, default=0)),
                ('service_tier', models.CharField(default='standard', max_length=8)),
            ],
            options={
                'indexes': [models.Index(fields=['hour', 'change'], name='rollup_delta_hour')],
            },
        ),
        migrations.CreateModel(
            name='DailyUsage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('requests', models.BigIntegerField(default=0)),
                ('errors', models.BigIntegerField(default=0)),
                ('input_tokens', models.BigIntegerField(default=0)),
                ('cached_tokens', models.BigIntegerField(default=0)),
                ('output_tokens', models.BigIntegerField(default=0)),
                ('ok_input_tokens', models.BigIntegerField(default=0)),
                ('ok_cached_tokens', models.BigIntegerField(default=0)),
                ('ok_output_tokens', models.BigIntegerField(default=0)),
                ('compliant_requests', models.BigIntegerField(default=0)),
                ('compliant_input_tokens', models.BigIntegerField(default=0)),
                ('compliant_cached_tokens', models.BigIntegerField(default=0)),
                ('compliant_output_tokens', models.BigIntegerField(default=0)),
                ('ttft_ms_sum', models.FloatField(default=0)),
                ('ttft_count', models.BigIntegerField(default=0)),
                ('tpot_ms_sum', models.FloatField(default=0)),
                ('tpot_count', models.BigIntegerField(default=0)),
                ('latency_ms_sum', models.FloatField(default=0)),
                ('latency_count', models.BigIntegerField(default=0)),
                ('latency_histogram', models.JSONField(default=list)),
                ('is_demo', models.BooleanField(default=False)),
                ('day', models.DateField()),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='portal.tenant')),
                ('deployment', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='metering.deployment')),
                ('cache_write_tokens', models.BigIntegerField(default=0)),
                ('ok_cache_write_tokens', models.BigIntegerField(default=0)),
                ('ok_reasoning_tokens', models.BigIntegerField(default=0)),
                ('reasoning_tokens', models.BigIntegerField(default=0)),
                ('project_id', models.BigIntegerField(db_default=0, default=0)),
                ('service_tier', models.CharField(default='standard', max_length=8)),
            ],
            options={
                'indexes': [models.Index(fields=['day'], name='daily_day_idx')],
                'constraints': [models.UniqueConstraint(fields=('tenant', 'deployment', 'service_tier', 'day', 'project_id'), name='daily_unique')],
            },
        ),
        migrations.CreateModel(
            name='HourlyUsage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('requests', models.BigIntegerField(default=0)),
                ('errors', models.BigIntegerField(default=0)),
                ('input_tokens', models.BigIntegerField(default=0)),
                ('cached_tokens', models.BigIntegerField(default=0)),
                ('output_tokens', models.BigIntegerField(default=0)),
                ('ok_input_tokens', models.BigIntegerField(default=0)),
                ('ok_cached_tokens', models.BigIntegerField(default=0)),
                ('ok_output_tokens', models.BigIntegerField(default=0)),
                ('compliant_requests', models.BigIntegerField(default=0)),
                ('compliant_input_tokens', models.BigIntegerField(default=0)),
                ('compliant_cached_tokens', models.BigIntegerField(default=0)),
                ('compliant_output_tokens', models.BigIntegerField(default=0)),
                ('ttft_ms_sum', models.FloatField(default=0)),
                ('ttft_count', models.BigIntegerField(default=0)),
                ('tpot_ms_sum', models.FloatField(default=0)),
                ('tpot_count', models.BigIntegerField(default=0)),
                ('latency_ms_sum', models.FloatField(default=0)),
                ('latency_count', models.BigIntegerField(default=0)),
                ('latency_histogram', models.JSONField(default=list)),
                ('is_demo', models.BooleanField(default=False)),
                ('hour', models.DateTimeField()),
                ('deployment', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='metering.deployment')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='portal.tenant')),
                ('cache_write_tokens', models.BigIntegerField(default=0)),
                ('ok_cache_write_tokens', models.BigIntegerField(default=0)),
                ('ok_reasoning_tokens', models.BigIntegerField(default=0)),
                ('reasoning_tokens', models.BigIntegerField(default=0)),
                ('project_id', models.BigIntegerField(db_default=0, default=0)),
                ('service_tier', models.CharField(default='standard', max_length=8)),
            ],
            options={
                'indexes': [models.Index(fields=['hour'], name='hourly_hour_idx')],
                'constraints': [models.UniqueConstraint(fields=('tenant', 'deployment', 'service_tier', 'hour', 'project_id'), name='hourly_unique')],
            },
        ),
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
        migrations.CreateModel(
            name='FoldPending',
            fields=[
                ('event_id', models.BigIntegerField(primary_key=True, serialize=False)),
                ('time', models.DateTimeField()),
                ('queued_at', models.DateTimeField()),
            ],
        ),
        migrations.AddField(
            model_name='usageevent',
            name='cache_write_tokens',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='usageevent',
            name='reasoning_tokens',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.RenameField(
            model_name='foldpending',
            old_name='event_id',
            new_name='first_id',
        ),
        migrations.RenameField(
            model_name='foldpending',
            old_name='time',
            new_name='time_min',
        ),
        migrations.AddField(
            model_name='foldpending',
            name='last_id',
            field=models.BigIntegerField(default=0),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='foldpending',
            name='time_max',
            field=models.DateTimeField(null=True),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='foldpending',
            name='events',
            field=models.PositiveIntegerField(default=1),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name='foldpending',
            name='time_max',
            field=models.DateTimeField(),
        ),
        postgresql_only(
            f"ALTER TABLE metering_eventkey ALTER COLUMN id SET INCREMENT BY {EVENT_ID_BLOCK}",
            "ALTER TABLE metering_eventkey ALTER COLUMN id SET INCREMENT BY 1",
        ),
        postgresql_only(BRIN_FORWARD, BRIN_BACKWARD),
        migrations.AddField(
            model_name='usageevent',
            name='project_id',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='usageevent',
            name='service_tier',
            field=models.CharField(db_default='standard', default='standard', max_length=8),
        ),
    ]
