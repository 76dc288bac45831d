"""Ledger transactions carry an accounting date (kpis.md, Accounting dates). Existing rows
take theirs from what they are: an invoice's or SLA credit's the last day of the month it
belongs to, any other its own UTC day. The rows are append-only (a trigger refuses UPDATE
on PostgreSQL), so the backfill lifts that guard for its one statement."""

from datetime import UTC, timedelta

from django.db import migrations, models

GUARD = "billing_ledgertransaction_append_only"


def backfill(apps, schema_editor):
    transactions = apps.get_model("billing", "LedgerTransaction")
    postgresql = schema_editor.connection.vendor == "postgresql"
    if postgresql:
        schema_editor.execute(f"ALTER TABLE billing_ledgertransaction DISABLE TRIGGER {GUARD}")
    for row in transactions.objects.all().only("kind", "period_start", "occurred_at"):
        if row.kind in ("invoice", "sla_credit") and row.period_start is not None:
            start = row.period_start.astimezone(UTC)
            following = (start.replace(day=1) + timedelta(days=32)).replace(day=1)
            day = (following - timedelta(days=1)).date()
        else:
            day = row.occurred_at.astimezone(UTC).date()
        transactions.objects.filter(pk=row.pk).update(accounting_date=day)
    if postgresql:
        schema_editor.execute(f"ALTER TABLE billing_ledgertransaction ENABLE TRIGGER {GUARD}")


class Migration(migrations.Migration):
    dependencies = [("billing", "0003_line_token_class_labels")]

    operations = [
        migrations.AddField(
            model_name="ledgertransaction",
            name="accounting_date",
            field=models.DateField(null=True),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="ledgertransaction",
            name="accounting_date",
            field=models.DateField(),
        ),
        migrations.AddIndex(
            model_name="ledgertransaction",
            index=models.Index(fields=["accounting_date"], name="ledger_tx_accounting_idx"),
        ),
    ]
