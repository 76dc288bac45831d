"""Migrations 0001 to 0011 squashed (`replaces` them: a database that applied some of them
goes on with those that remain). Left out: the data migrations of 0008 and 0009 (elidable),
whose rows cannot exist yet where this migration runs. The audit log's append-only guard
(0002) is created last, so that the schema operations before it fold into their models'
CreateModel."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

from portal.migration_sql import postgresql_only

# 0002_audit_append_only
GUARD = """
CREATE FUNCTION portal_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.actor_id IS NULL AND OLD.actor_id IS NOT NULL
       AND NEW.at = OLD.at AND NEW.action = OLD.action AND NEW.object_type = OLD.object_type
       AND NEW.object_id = OLD.object_id
       AND NEW.before IS NOT DISTINCT FROM OLD.before
       AND NEW.after IS NOT DISTINCT FROM OLD.after THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'portal_auditentry rows are append-only: % refused', TG_OP
        USING ERRCODE = 'restrict_violation';
END $$;
CREATE TRIGGER portal_audit_append_only BEFORE UPDATE OR DELETE ON portal_auditentry
    FOR EACH ROW EXECUTE FUNCTION portal_audit_append_only();
"""

DROP = """
DROP TRIGGER portal_audit_append_only ON portal_auditentry;
DROP FUNCTION portal_audit_append_only();
"""


class Migration(migrations.Migration):

    replaces = [('portal', '0001_initial'), ('portal', '0002_audit_append_only'), ('portal', '0003_pipeline'), ('portal', '0004_token_bound_tenant'), ('portal', '0005_closed_month_closing'), ('portal', '0006_alert_delivery'), ('portal', '0007_alert_rules'), ('portal', '0008_alert_rule_kinds_registered'), ('portal', '0009_audit_credentials_redacted'), ('portal', '0010_cursor_until'), ('portal', '0011_projects')]

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Tenant',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=64, unique=True)),
                ('name', models.CharField(max_length=200)),
                ('status', models.CharField(choices=[('active', 'Active'), ('suspended', 'Suspended'), ('closed', 'Closed')], default='active', max_length=16)),
                ('billing_name', models.CharField(blank=True, max_length=200)),
                ('billing_address', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['slug'],
            },
        ),
        migrations.CreateModel(
            name='AuditEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('action', models.CharField(max_length=32)),
                ('object_type', models.CharField(max_length=64)),
                ('object_id', models.CharField(max_length=128)),
                ('before', models.JSONField(blank=True, null=True)),
                ('after', models.JSONField(blank=True, null=True)),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name_plural': 'audit entries',
                'ordering': ['-at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='Membership',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='membership', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='members', to='portal.tenant')),
            ],
        ),
        migrations.CreateModel(
            name='StageRequest',
            fields=[
                ('name', models.CharField(max_length=64, primary_key=True, serialize=False)),
                ('pending', models.BooleanField(default=False)),
                ('requested_at', models.DateTimeField(null=True)),
            ],
        ),
        migrations.CreateModel(
            name='ClosedMonth',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month', models.DateTimeField(unique=True)),
                ('closed_at', models.DateTimeField()),
                ('closing', models.BooleanField(default=False)),
            ],
            options={
                'ordering': ['month'],
            },
        ),
        migrations.CreateModel(
            name='Delivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('channel', models.CharField(choices=[('webhook', 'Webhook'), ('email', 'Email')], max_length=8)),
                ('state', models.CharField(choices=[('pending', 'Pending'), ('delivered', 'Delivered'), ('failed', 'Failed')], default='pending', max_length=10)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('next_attempt_at', models.DateTimeField(blank=True, null=True)),
                ('delivered_at', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-pk'],
            },
        ),
        migrations.CreateModel(
            name='DeliveryAttempt',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField()),
                ('status_code', models.PositiveIntegerField(blank=True, null=True)),
                ('latency_ms', models.PositiveIntegerField(default=0)),
                ('response', models.TextField(blank=True)),
                ('error', models.CharField(blank=True, max_length=300)),
                ('delivery', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='attempt_log', to='portal.delivery')),
            ],
            options={
                'ordering': ['pk'],
            },
        ),
        migrations.CreateModel(
            name='Event',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('webhook_id', models.CharField(max_length=40, unique=True)),
                ('type', models.CharField(max_length=64)),
                ('level', models.CharField(choices=[('info', 'Info'), ('warning', 'Warning'), ('critical', 'Critical')], default='info', max_length=8)),
                ('for_factory', models.BooleanField(default=True)),
                ('occurred_at', models.DateTimeField()),
                ('summary', models.CharField(max_length=300)),
                ('link', models.CharField(blank=True, max_length=500)),
                ('data', models.JSONField(default=dict)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('tenant', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='events', to='portal.tenant')),
            ],
            options={
                'ordering': ['-pk'],
                'indexes': [models.Index(fields=['tenant', '-id'], name='portal_even_tenant__1d3f88_idx'), models.Index(fields=['type'], name='portal_even_type_0af6c7_idx')],
            },
        ),
        migrations.AddField(
            model_name='delivery',
            name='event',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='portal.event'),
        ),
        migrations.CreateModel(
            name='WebhookEndpoint',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('url', models.URLField(max_length=2000)),
                ('description', models.CharField(blank=True, max_length=200)),
                ('event_types', models.JSONField(blank=True, default=list)),
                ('enabled', models.BooleanField(default=True)),
                ('disabled_reason', models.CharField(blank=True, max_length=200)),
                ('secret', models.CharField(max_length=64)),
                ('previous_secret', models.CharField(blank=True, max_length=64)),
                ('previous_secret_until', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('tenant', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='webhook_endpoints', to='portal.tenant')),
            ],
            options={
                'ordering': ['pk'],
            },
        ),
        migrations.AddField(
            model_name='delivery',
            name='endpoint',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='portal.webhookendpoint'),
        ),
        migrations.CreateModel(
            name='EmailSubscription',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('event_type', models.CharField(max_length=64)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='email_subscriptions', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('user', 'event_type'), name='email_subscription_once')],
            },
        ),
        migrations.CreateModel(
            name='InboxRead',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('event', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='reads', to='portal.event')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='inbox_reads', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('user', 'event'), name='inbox_read_once')],
            },
        ),
        migrations.AddIndex(
            model_name='delivery',
            index=models.Index(fields=['state', 'next_attempt_at'], name='portal_deli_state_a7ce01_idx'),
        ),
        migrations.AddConstraint(
            model_name='delivery',
            constraint=models.UniqueConstraint(condition=models.Q(('endpoint__isnull', False)), fields=('event', 'endpoint'), name='delivery_once_per_endpoint'),
        ),
        migrations.AddConstraint(
            model_name='delivery',
            constraint=models.UniqueConstraint(condition=models.Q(('user__isnull', False)), fields=('event', 'user'), name='delivery_once_per_user'),
        ),
        migrations.CreateModel(
            name='AlertRule',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(max_length=32)),
                ('scope', models.JSONField(blank=True, default=dict)),
                ('params', models.JSONField(blank=True, default=dict)),
                ('level', models.CharField(choices=[('info', 'Info'), ('warning', 'Warning'), ('critical', 'Critical')], default='warning', max_length=8)),
                ('enabled', models.BooleanField(default=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('tenant', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='alert_rules', to='portal.tenant')),
                ('one_per_tenant', models.BooleanField(default=False, editable=False)),
                ('one_key', models.CharField(blank=True, default='', editable=False, max_length=200)),
            ],
            options={
                'ordering': ['pk'],
                'constraints': [models.UniqueConstraint(condition=models.Q(('one_per_tenant', True)), fields=('tenant', 'kind', 'one_key'), name='alert_rule_one_per_tenant_key')],
            },
        ),
        migrations.CreateModel(
            name='Alert',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('scope_key', models.CharField(blank=True, max_length=200)),
                ('window_start', models.DateTimeField()),
                ('threshold', models.CharField(blank=True, max_length=40)),
                ('state', models.CharField(choices=[('firing', 'Firing'), ('resolved', 'Resolved')], default='firing', max_length=8)),
                ('level', models.CharField(choices=[('info', 'Info'), ('warning', 'Warning'), ('critical', 'Critical')], max_length=8)),
                ('value', models.CharField(max_length=60)),
                ('figures', models.JSONField(default=dict)),
                ('summary', models.CharField(max_length=300)),
                ('link', models.CharField(blank=True, max_length=500)),
                ('fired_at', models.DateTimeField()),
                ('resolved_at', models.DateTimeField(blank=True, null=True)),
                ('rule', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='alerts', to='portal.alertrule')),
            ],
            options={
                'ordering': ['-fired_at', '-pk'],
                'indexes': [models.Index(fields=['state', 'rule'], name='portal_aler_state_89b230_idx')],
                'constraints': [models.UniqueConstraint(fields=('rule', 'scope_key', 'window_start', 'threshold'), name='alert_key')],
            },
        ),
        migrations.CreateModel(
            name='Cursor',
            fields=[
                ('name', models.CharField(max_length=128, primary_key=True, serialize=False)),
                ('position', models.BigIntegerField(default=0)),
                ('until', models.DateTimeField(null=True)),
            ],
        ),
        migrations.CreateModel(
            name='Project',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=64)),
                ('name', models.CharField(max_length=200)),
                ('cost_center', models.CharField(blank=True, max_length=100)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='projects', to='portal.tenant')),
            ],
            options={
                'ordering': ['tenant', 'slug'],
                'constraints': [models.UniqueConstraint(fields=('tenant', 'slug'), name='project_slug_in_tenant')],
            },
        ),
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100)),
                ('prefix', models.CharField(help_text='First characters, to recognise a token.', max_length=16)),
                ('digest', models.CharField(max_length=64, unique=True)),
                ('scopes', models.JSONField(default=list)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('last_used_at', models.DateTimeField(blank=True, null=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
                ('bound_tenant', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='bound_tokens', to='portal.tenant')),
                ('bound_project', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='bound_tokens', to='portal.project')),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        postgresql_only(GUARD, DROP),
    ]
