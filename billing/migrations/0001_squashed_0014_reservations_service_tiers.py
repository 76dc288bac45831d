"""Migrations 0001 to 0014 squashed (`replaces` them: a database that applied some of them
goes on with those that remain). Left out: the data migrations of 0004 to 0007 (elidable),
whose rows cannot exist yet where this migration runs. Last: the PostgreSQL guards of the
ledger (0002), credit notes (0007) and prepaid balances (0008), then the rating requests
0005, 0006 and 0012 queued (a table with rows written in this transaction is altered no
more on PostgreSQL), so that the schema operations before them fold into their models'
CreateModel."""

from datetime import UTC, datetime

import billing.models.pricing
import django.db.models.deletion
import portal.periods
from decimal import Decimal
from django.conf import settings
from django.db import migrations, models

from portal.migration_sql import postgresql_only

# 0002_ledger_guards
LEDGER_GUARDS = """
CREATE FUNCTION billing_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% rows are append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END $$;

CREATE TRIGGER billing_posting_append_only BEFORE UPDATE OR DELETE ON billing_posting
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_change();
CREATE TRIGGER billing_ledgertransaction_append_only
    BEFORE UPDATE OR DELETE ON billing_ledgertransaction
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_change();
CREATE TRIGGER billing_invoiceline_append_only BEFORE UPDATE OR DELETE ON billing_invoiceline
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_change();
CREATE TRIGGER billing_promotionuse_append_only BEFORE UPDATE OR DELETE ON billing_promotionuse
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_change();

-- Checked at commit, once per transaction touched: the postings of a ledger transaction
-- sum to zero in every currency, and a transaction has at least two postings.
CREATE FUNCTION billing_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT currency, sum(amount) AS total INTO bad
        FROM billing_posting WHERE transaction_id = NEW.transaction_id
        GROUP BY currency HAVING sum(amount) <> 0 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'ledger transaction % does not balance: % % left over',
            NEW.transaction_id, bad.total, bad.currency
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER billing_posting_balanced AFTER INSERT ON billing_posting
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION billing_check_balanced();

-- An issued (or paid, or void) invoice keeps its number, tenant, month, currency, total and
-- due date; only its status and the dates of payment or voiding move on. It is never deleted.
CREATE FUNCTION billing_invoice_frozen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.status <> 'draft' THEN
            RAISE EXCEPTION 'invoice % is % and cannot be deleted', OLD.number, OLD.status
                USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN OLD;
    END IF;
    IF OLD.status <> 'draft' AND (
        NEW.number IS DISTINCT FROM OLD.number
        OR NEW.tenant_id <> OLD.tenant_id
        OR NEW.period_start <> OLD.period_start
        OR NEW.currency <> OLD.currency
        OR NEW.total <> OLD.total
        OR NEW.issued_at IS DISTINCT FROM OLD.issued_at
        OR NEW.due_at IS DISTINCT FROM OLD.due_at
        OR NEW.issue_transaction_id IS DISTINCT FROM OLD.issue_transaction_id
        OR NEW.status = 'draft'
        OR OLD.status = 'void'
    ) THEN
        RAISE EXCEPTION 'invoice % is % and cannot change', OLD.number, OLD.status
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER billing_invoice_frozen BEFORE UPDATE OR DELETE ON billing_invoice
    FOR EACH ROW EXECUTE FUNCTION billing_invoice_frozen();
"""

LEDGER_DROP = """
DROP TRIGGER billing_invoice_frozen ON billing_invoice;
DROP FUNCTION billing_invoice_frozen();
DROP TRIGGER billing_posting_balanced ON billing_posting;
DROP FUNCTION billing_check_balanced();
DROP TRIGGER billing_promotionuse_append_only ON billing_promotionuse;
DROP TRIGGER billing_invoiceline_append_only ON billing_invoiceline;
DROP TRIGGER billing_ledgertransaction_append_only ON billing_ledgertransaction;
DROP TRIGGER billing_posting_append_only ON billing_posting;
DROP FUNCTION billing_refuse_change();
"""

# 0007_close_credit_notes
CREDIT_NOTE_GUARDS = """
CREATE TRIGGER billing_creditnote_append_only BEFORE UPDATE OR DELETE ON billing_creditnote
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_change();
CREATE TRIGGER billing_creditnoteline_append_only
    BEFORE UPDATE OR DELETE ON billing_creditnoteline
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_change();
"""

CREDIT_NOTE_DROP = """
DROP TRIGGER billing_creditnoteline_append_only ON billing_creditnoteline;
DROP TRIGGER billing_creditnote_append_only ON billing_creditnote;
"""

# 0008_prepaid
PREPAID_GUARDS = """
CREATE TRIGGER billing_prepaidbalance_append_only BEFORE UPDATE OR DELETE ON billing_prepaidbalance
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_change();
CREATE TRIGGER billing_prepaiddraw_append_only BEFORE UPDATE OR DELETE ON billing_prepaiddraw
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_change();
CREATE TRIGGER billing_prepaidbreakage_append_only
    BEFORE UPDATE OR DELETE ON billing_prepaidbreakage
    FOR EACH ROW EXECUTE FUNCTION billing_refuse_change();
"""

PREPAID_DROP = """
DROP TRIGGER billing_prepaidbreakage_append_only ON billing_prepaidbreakage;
DROP TRIGGER billing_prepaiddraw_append_only ON billing_prepaiddraw;
DROP TRIGGER billing_prepaidbalance_append_only ON billing_prepaidbalance;
"""


def _rate_again(apps, schema_editor):
    """0005 and 0006: the rate stage rates every tenant's usage again, whole."""
    apps.get_model("billing", "RatingPending").objects.create(
        tenant=None, start=datetime(1970, 1, 1, tzinfo=UTC)
    )


def _rate_open_months_again(apps, schema_editor):
    """0012: the open months, from the end of the last closed month (every month while
    none is), are rated again from their start."""
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


def _queue_rating(apps, schema_editor):
    """The rating requests of 0005, 0006 and 0012, in one operation: a RunPython renders
    every model first."""
    _rate_again(apps, schema_editor)
    _rate_again(apps, schema_editor)
    _rate_open_months_again(apps, schema_editor)


class Migration(migrations.Migration):

    replaces = [('billing', '0001_initial'), ('billing', '0002_ledger_guards'), ('billing', '0003_rated_change_log'), ('billing', '0004_rated_change_end'), ('billing', '0005_incremental_rating'), ('billing', '0006_token_classes'), ('billing', '0007_close_credit_notes'), ('billing', '0008_prepaid'), ('billing', '0009_invoice_overdue_raised'), ('billing', '0010_rated_mark'), ('billing', '0011_contract_slo_target'), ('billing', '0012_boundaries_split'), ('billing', '0013_rated_usage_projects'), ('billing', '0014_reservations_service_tiers')]

    initial = True

    dependencies = [
        ('metering', '0017_service_tiers'),
        ('portal', '0011_projects'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Account',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('code', models.CharField(max_length=200, unique=True)),
                ('name', models.CharField(max_length=200)),
                ('kind', models.CharField(choices=[('asset', 'Asset'), ('liability', 'Liability'), ('revenue', 'Revenue'), ('contra_revenue', 'Contra Revenue'), ('expense', 'Expense')], max_length=16)),
                ('model', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='metering.servedmodel')),
                ('tenant', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='portal.tenant')),
            ],
            options={
                'ordering': ['code'],
            },
        ),
        migrations.CreateModel(
            name='LedgerTransaction',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('invoice', 'Invoice'), ('payment', 'Payment'), ('sla_credit', 'Sla Credit'), ('credit_note', 'Credit Note'), ('breakage', 'Breakage'), ('reversal', 'Reversal'), ('manual', 'Manual')], max_length=16)),
                ('memo', models.CharField(max_length=300)),
                ('period_start', models.DateTimeField(blank=True, null=True)),
                ('occurred_at', models.DateTimeField()),
                ('accounting_date', models.DateField()),
                ('idempotency_key', models.CharField(blank=True, max_length=200, null=True, unique=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to=settings.AUTH_USER_MODEL)),
                ('reverses', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='reversed_by', to='billing.ledgertransaction')),
                ('tenant', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='portal.tenant')),
            ],
            options={
                'ordering': ['-occurred_at', '-id'],
                'indexes': [models.Index(fields=['tenant', 'occurred_at'], name='ledger_tx_tenant_idx'), models.Index(fields=['accounting_date'], name='ledger_tx_accounting_idx')],
            },
        ),
        migrations.CreateModel(
            name='Invoice',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('period_start', models.DateTimeField()),
                ('period_end', models.DateTimeField()),
                ('status', models.CharField(choices=[('draft', 'Draft'), ('issued', 'Issued'), ('paid', 'Paid'), ('void', 'Void')], default='draft', max_length=8)),
                ('number', models.CharField(blank=True, max_length=20, null=True, unique=True)),
                ('currency', models.CharField(max_length=3)),
                ('total', models.DecimalField(decimal_places=4, max_digits=20)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('issued_at', models.DateTimeField(blank=True, null=True)),
                ('due_at', models.DateTimeField(blank=True, null=True)),
                ('paid_at', models.DateTimeField(blank=True, null=True)),
                ('voided_at', models.DateTimeField(blank=True, null=True)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='invoices', to='portal.tenant')),
                ('issue_transaction', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='billing.ledgertransaction')),
                ('paid_amount', models.DecimalField(blank=True, decimal_places=4, max_digits=20, null=True)),
                ('kind', models.CharField(choices=[('usage', 'Usage'), ('purchase', 'Purchase')], default='usage', max_length=8)),
                ('overdue_raised_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'ordering': ['-period_start', 'tenant__slug'],
                'constraints': [models.UniqueConstraint(condition=models.Q(models.Q(('status', 'void'), _negated=True), ('kind', 'usage')), fields=('tenant', 'period_start'), name='invoice_one_per_tenant_month')],
            },
        ),
        migrations.CreateModel(
            name='Posting',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('currency', models.CharField(max_length=3)),
                ('account', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='postings', to='billing.account')),
                ('transaction', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='postings', to='billing.ledgertransaction')),
            ],
            options={
                'ordering': ['transaction_id', 'id'],
                'indexes': [models.Index(fields=['account', 'transaction'], name='posting_account_idx')],
                'constraints': [models.CheckConstraint(condition=models.Q(('amount', 0), _negated=True), name='posting_not_zero')],
            },
        ),
        migrations.CreateModel(
            name='PromotionalCredit',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('currency', models.CharField(max_length=3)),
                ('expires_at', models.DateTimeField(blank=True, null=True)),
                ('description', models.CharField(blank=True, max_length=200)),
                ('effective_from', models.DateTimeField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='promotions', to='portal.tenant')),
            ],
            options={
                'ordering': ['tenant__slug', 'effective_from'],
                'constraints': [models.CheckConstraint(condition=models.Q(('amount__gt', 0)), name='promotion_positive')],
            },
        ),
        migrations.CreateModel(
            name='RatedChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('start', models.DateTimeField()),
                ('tenant', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, to='portal.tenant')),
                ('end', models.DateTimeField()),
            ],
        ),
        migrations.CreateModel(
            name='RatingPending',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('start', models.DateTimeField()),
                ('tenant', models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, to='portal.tenant')),
                ('hours', models.BooleanField(default=True)),
            ],
        ),
        migrations.CreateModel(
            name='RatedTenantMonth',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month_start', models.DateTimeField()),
                ('currency', models.CharField(blank=True, max_length=3)),
                ('usage_amount', models.DecimalField(decimal_places=4, default=0, max_digits=20)),
                ('minimum_shortfall', models.DecimalField(decimal_places=4, default=0, max_digits=20)),
                ('error', models.TextField(blank=True)),
                ('rated_at', models.DateTimeField()),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='portal.tenant')),
                ('credits_applied', models.JSONField(default=list)),
                ('quantities', models.JSONField(default=list)),
                ('lines', models.JSONField(default=list)),
                ('promotion_rate', models.DecimalField(decimal_places=30, default=0, max_digits=40)),
                ('promotions', models.DecimalField(decimal_places=20, default=0, max_digits=40)),
                ('realized', models.DecimalField(decimal_places=20, default=0, max_digits=40)),
                ('reserved_amount', models.DecimalField(decimal_places=4, default=0, max_digits=20)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('tenant', 'month_start'), name='rated_tenant_month')],
            },
        ),
        migrations.CreateModel(
            name='RatedHour',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month_start', models.DateTimeField()),
                ('hour', models.DateTimeField()),
                ('consumed', models.BigIntegerField()),
                ('paid_tokens', models.BigIntegerField()),
                ('realized', models.DecimalField(decimal_places=20, max_digits=40)),
                ('quantities', models.JSONField()),
                ('cuts', models.JSONField(default=dict)),
                ('tenant', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, to='portal.tenant')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('tenant', 'hour'), name='rated_hour')],
            },
        ),
        migrations.CreateModel(
            name='CreditNote',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.CharField(max_length=20, unique=True)),
                ('period_start', models.DateTimeField()),
                ('reason', models.CharField(choices=[('dispute', 'Dispute'), ('sla', 'Sla'), ('billing_error', 'Billing Error'), ('goodwill', 'Goodwill')], max_length=16)),
                ('settle', models.CharField(choices=[('refund', 'Refund'), ('balance', 'Balance')], max_length=8)),
                ('currency', models.CharField(max_length=3)),
                ('total', models.DecimalField(decimal_places=4, max_digits=20)),
                ('reduced', models.DecimalField(decimal_places=4, max_digits=20)),
                ('settled', models.DecimalField(decimal_places=4, max_digits=20)),
                ('memo', models.CharField(blank=True, max_length=300)),
                ('issued_at', models.DateTimeField()),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to=settings.AUTH_USER_MODEL)),
                ('invoice', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='credit_notes', to='billing.invoice')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='credit_notes', to='portal.tenant')),
                ('transaction', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='billing.ledgertransaction')),
            ],
            options={
                'ordering': ['-issued_at', '-number'],
            },
        ),
        migrations.CreateModel(
            name='PromotionUse',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('credit', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='uses', to='billing.promotionalcredit')),
                ('invoice', models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='promotion_uses', to='billing.invoice')),
                ('credit_note', models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='promotion_uses', to='billing.creditnote')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('credit', 'invoice'), name='promotion_use_unique')],
            },
        ),
        migrations.CreateModel(
            name='SlaCredit',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month_start', models.DateTimeField()),
                ('uptime', models.DecimalField(decimal_places=10, max_digits=12, null=True)),
                ('credit_pct', models.DecimalField(decimal_places=4, max_digits=7)),
                ('base_amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('currency', models.CharField(max_length=3)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('invoice', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='sla_credits', to='billing.invoice')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='sla_credits', to='portal.tenant')),
                ('transaction', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='billing.ledgertransaction')),
                ('credit_note', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='billing.creditnote')),
            ],
            options={
                'ordering': ['-month_start', 'tenant__slug'],
                'constraints': [models.UniqueConstraint(fields=('tenant', 'month_start'), name='sla_credit_once')],
            },
        ),
        migrations.CreateModel(
            name='DocumentCounter',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('series', models.CharField(max_length=4)),
                ('year', models.PositiveIntegerField()),
                ('last', models.PositiveIntegerField(default=0)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('series', 'year'), name='document_counter_series_year')],
            },
        ),
        migrations.CreateModel(
            name='MonthClose',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month', models.DateTimeField(unique=True)),
                ('started_at', models.DateTimeField()),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('error', models.TextField(blank=True)),
                ('started_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-month'],
            },
        ),
        migrations.CreateModel(
            name='CloseStep',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=16)),
                ('done_at', models.DateTimeField()),
                ('detail', models.JSONField(default=dict)),
                ('close', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='billing.monthclose')),
            ],
            options={
                'ordering': ['close_id', 'done_at', 'id'],
                'constraints': [models.UniqueConstraint(fields=('close', 'name'), name='close_step_once')],
            },
        ),
        migrations.CreateModel(
            name='PrepaidBalance',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('currency', models.CharField(max_length=3)),
                ('starts_at', models.DateTimeField()),
                ('expires_at', models.DateTimeField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to=settings.AUTH_USER_MODEL)),
                ('invoice', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='prepaid', to='billing.invoice')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='prepaid', to='portal.tenant')),
            ],
            options={
                'ordering': ['expires_at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='PrepaidBreakage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('balance', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='breakage', to='billing.prepaidbalance')),
                ('transaction', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='billing.ledgertransaction')),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.CreateModel(
            name='PrepaidDraw',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('balance', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='draws', to='billing.prepaidbalance')),
                ('invoice', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='prepaid_draws', to='billing.invoice')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('balance', 'invoice'), name='prepaid_draw_once')],
            },
        ),
        migrations.CreateModel(
            name='RatedMark',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('rated_until', models.DateTimeField()),
            ],
        ),
        migrations.CreateModel(
            name='Contract',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('paid', 'Paid'), ('trial', 'Trial'), ('internal', 'Internal')], max_length=16)),
                ('discount_pct', models.DecimalField(decimal_places=4, default=Decimal('0'), max_digits=7)),
                ('free_tokens_per_month', models.BigIntegerField(default=0)),
                ('volume_tiers', models.JSONField(blank=True, default=list)),
                ('committed_minimum', models.DecimalField(decimal_places=4, default=Decimal('0'), max_digits=20)),
                ('currency', models.CharField(max_length=3)),
                ('credit_tiers', models.JSONField(blank=True, default=billing.models.pricing.default_credit_tiers)),
                ('payment_terms_days', models.PositiveSmallIntegerField(default=30)),
                ('effective_from', models.DateTimeField(validators=[portal.periods.validate_whole_hour])),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='contracts', to='portal.tenant')),
                ('slo_target', models.DecimalField(blank=True, decimal_places=5, max_digits=6, null=True)),
            ],
            options={
                'ordering': ['tenant__slug', 'effective_from'],
                'constraints': [models.UniqueConstraint(fields=('tenant', 'effective_from'), name='contract_version_unique'), models.CheckConstraint(condition=models.Q(('discount_pct__gte', 0), ('discount_pct__lte', 100)), name='contract_discount_pct_range'), models.CheckConstraint(condition=models.Q(('committed_minimum__gte', 0), ('free_tokens_per_month__gte', 0)), name='contract_amounts_not_negative')],
            },
        ),
        migrations.CreateModel(
            name='InvoiceLine',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveSmallIntegerField()),
                ('kind', models.CharField(choices=[('usage', 'Usage'), ('reservation', 'Reservation'), ('promotion', 'Promotion'), ('minimum', 'Minimum'), ('sla_credit', 'Sla Credit'), ('adjustment', 'Adjustment'), ('credit', 'Credit'), ('prepaid', 'Prepaid'), ('purchase', 'Purchase')], max_length=16)),
                ('model', models.CharField(blank=True, max_length=100)),
                ('token_class', models.CharField(blank=True, choices=[('input', 'input'), ('cached_input', 'cached_input'), ('cache_write', 'cache_write'), ('output', 'output'), ('reasoning', 'reasoning')], max_length=16)),
                ('quantity', models.BigIntegerField(default=0)),
                ('list_unit_price', models.DecimalField(blank=True, decimal_places=10, max_digits=20, null=True)),
                ('list_amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('discount_pct', models.DecimalField(decimal_places=6, default=0, max_digits=9)),
                ('discount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('description', models.CharField(max_length=300)),
                ('for_month', models.DateTimeField()),
                ('invoice', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='lines', to='billing.invoice')),
                ('price_class', models.CharField(blank=True, choices=[('input', 'input'), ('cached_input', 'cached_input'), ('cache_write', 'cache_write'), ('output', 'output'), ('reasoning', 'reasoning')], max_length=16)),
                ('gpu_hours', models.DecimalField(blank=True, decimal_places=6, max_digits=20, null=True)),
                ('service_tier', models.CharField(blank=True, max_length=8)),
            ],
            options={
                'ordering': ['invoice_id', 'position'],
                'constraints': [models.UniqueConstraint(fields=('invoice', 'position'), name='invoice_line_position')],
            },
        ),
        migrations.CreateModel(
            name='CreditNoteLine',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveSmallIntegerField()),
                ('kind', models.CharField(choices=[('usage', 'Usage'), ('reservation', 'Reservation'), ('promotion', 'Promotion'), ('minimum', 'Minimum'), ('sla_credit', 'Sla Credit'), ('adjustment', 'Adjustment'), ('credit', 'Credit'), ('prepaid', 'Prepaid'), ('purchase', 'Purchase')], max_length=16)),
                ('model', models.CharField(blank=True, max_length=100)),
                ('list_amount', models.DecimalField(decimal_places=4, default=0, max_digits=20)),
                ('discount', models.DecimalField(decimal_places=4, default=0, max_digits=20)),
                ('amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('description', models.CharField(max_length=300)),
                ('for_month', models.DateTimeField()),
                ('credit_note', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='lines', to='billing.creditnote')),
                ('invoice_line', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='credited', to='billing.invoiceline')),
            ],
            options={
                'ordering': ['credit_note_id', 'position'],
                'constraints': [models.UniqueConstraint(fields=('credit_note', 'position'), name='credit_note_line_position')],
            },
        ),
        migrations.CreateModel(
            name='Price',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('token_class', models.CharField(choices=[('input', 'input'), ('cached_input', 'cached_input'), ('cache_write', 'cache_write'), ('output', 'output'), ('reasoning', 'reasoning')], max_length=16)),
                ('per_million', models.DecimalField(decimal_places=10, max_digits=20)),
                ('currency', models.CharField(max_length=3)),
                ('effective_from', models.DateTimeField(validators=[portal.periods.validate_whole_hour])),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('model', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='prices', to='metering.servedmodel')),
                ('service_tier', models.CharField(default='standard', max_length=8)),
            ],
            options={
                'ordering': ['model__slug', 'service_tier', 'token_class', 'effective_from'],
                'constraints': [models.CheckConstraint(condition=models.Q(('per_million__gte', 0)), name='price_not_negative'), models.UniqueConstraint(fields=('model', 'token_class', 'service_tier', 'effective_from'), name='price_version_unique')],
            },
        ),
        migrations.CreateModel(
            name='RatedUsage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('hour', models.DateTimeField()),
                ('month_start', models.DateTimeField()),
                ('sale', models.CharField(choices=[('paid', 'Paid'), ('trial', 'Trial'), ('internal', 'Internal'), ('allowance', 'Allowance'), ('no_contract', 'No Contract')], max_length=16)),
                ('input_tokens', models.BigIntegerField(default=0)),
                ('cached_tokens', models.BigIntegerField(default=0)),
                ('output_tokens', models.BigIntegerField(default=0)),
                ('compliant_input_tokens', models.DecimalField(decimal_places=12, default=0, max_digits=30)),
                ('compliant_cached_tokens', models.DecimalField(decimal_places=12, default=0, max_digits=30)),
                ('compliant_output_tokens', models.DecimalField(decimal_places=12, default=0, max_digits=30)),
                ('list_value', models.DecimalField(decimal_places=12, default=0, max_digits=30)),
                ('contract_discount', models.DecimalField(decimal_places=12, default=0, max_digits=30)),
                ('tier_discount', models.DecimalField(decimal_places=12, default=0, max_digits=30)),
                ('realized', models.DecimalField(decimal_places=12, default=0, max_digits=30)),
                ('deployment', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='metering.deployment')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='portal.tenant')),
                ('tenant_month', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='usage', to='billing.ratedtenantmonth')),
                ('cache_write_tokens', models.BigIntegerField(default=0)),
                ('reasoning_tokens', models.BigIntegerField(default=0)),
                ('project_id', models.BigIntegerField(db_default=0, default=0)),
                ('covered', models.BooleanField(default=False)),
                ('service_tier', models.CharField(default='standard', max_length=8)),
            ],
            options={
                'indexes': [models.Index(fields=['hour'], name='rated_usage_hour'), models.Index(fields=['tenant', 'month_start'], name='rated_usage_tenant_month')],
                'constraints': [models.UniqueConstraint(fields=('tenant', 'deployment', 'hour', 'sale', 'service_tier', 'covered', 'project_id'), name='rated_usage_cell')],
            },
        ),
        migrations.CreateModel(
            name='Reservation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('hourly_rate', models.DecimalField(decimal_places=10, max_digits=20)),
                ('currency', models.CharField(max_length=3)),
                ('term', models.CharField(choices=[('none', 'None'), ('1m', '1M'), ('6m', '6M'), ('12m', '12M')], max_length=4)),
                ('starts_at', models.DateTimeField()),
                ('ends_at', models.DateTimeField(blank=True, null=True)),
                ('cancelled_at', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('deployment', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='reservations', to='metering.deployment')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='reservations', to='portal.tenant')),
            ],
            options={
                'ordering': ['tenant__slug', 'starts_at', 'pk'],
                'constraints': [models.CheckConstraint(condition=models.Q(('hourly_rate__gte', 0)), name='reservation_rate_not_negative'), models.CheckConstraint(condition=models.Q(('ends_at__isnull', True), ('ends_at__gte', models.F('starts_at')), _connector='OR'), name='reservation_ends_after_start')],
            },
        ),
        migrations.AddField(
            model_name='invoiceline',
            name='reservation',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='billing.reservation'),
        ),
        migrations.CreateModel(
            name='ServiceTierMultiplier',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('effective_from', models.DateTimeField(validators=[portal.periods.validate_whole_hour])),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('service_tier', models.CharField(choices=[('priority', 'priority'), ('flex', 'flex'), ('batch', 'batch')], max_length=8)),
                ('multiplier', models.DecimalField(decimal_places=6, max_digits=10)),
            ],
            options={
                'ordering': ['service_tier', 'effective_from'],
                'constraints': [models.UniqueConstraint(fields=('service_tier', 'effective_from'), name='service_tier_version_unique'), models.CheckConstraint(condition=models.Q(('multiplier__gte', 0)), name='service_tier_multiplier_not_negative')],
            },
        ),
        migrations.CreateModel(
            name='ReservationGpus',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('effective_from', models.DateTimeField(validators=[portal.periods.validate_whole_hour])),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('gpus', models.PositiveIntegerField()),
                ('reservation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='gpus', to='billing.reservation')),
            ],
            options={
                'ordering': ['reservation', 'effective_from'],
                'constraints': [models.UniqueConstraint(fields=('reservation', 'effective_from'), name='reservation_gpus_version_unique'), models.CheckConstraint(condition=models.Q(('gpus__gt', 0)), name='reservation_gpus_positive')],
            },
        ),
        postgresql_only(LEDGER_GUARDS, LEDGER_DROP),
        postgresql_only(CREDIT_NOTE_GUARDS, CREDIT_NOTE_DROP),
        postgresql_only(PREPAID_GUARDS, PREPAID_DROP),
        migrations.RunPython(_queue_rating, migrations.RunPython.noop),
    ]
