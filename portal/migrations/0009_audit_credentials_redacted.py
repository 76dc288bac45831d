"""Webhook secrets out of the audit log: entries written before the log redacted
credentials held them in `before` and `after`; they now say "(set)" instead. The
append-only guard (0002) is lifted for this one statement on PostgreSQL."""

from django.db import migrations

from portal.services import credentials_redacted

CREDENTIALS = {"webhook_endpoint": ("secret", "previous_secret")}


def redact(apps, schema_editor):
    AuditEntry = apps.get_model("portal", "AuditEntry")
    postgresql = schema_editor.connection.vendor == "postgresql"
    if postgresql:  # checks still deferred would forbid the ALTER TABLE
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        schema_editor.execute(
            "ALTER TABLE portal_auditentry DISABLE TRIGGER portal_audit_append_only"
        )
    for object_type, fields in CREDENTIALS.items():
        for entry in AuditEntry.objects.filter(object_type=object_type).iterator():
            before = entry.before and credentials_redacted(entry.before, fields)
            after = entry.after and credentials_redacted(entry.after, fields)
            if (before, after) != (entry.before, entry.after):
                AuditEntry.objects.filter(pk=entry.pk).update(before=before, after=after)
    if postgresql:
        schema_editor.execute(
            "ALTER TABLE portal_auditentry ENABLE TRIGGER portal_audit_append_only"
        )


class Migration(migrations.Migration):
    dependencies = [("portal", "0008_alert_rule_kinds_registered")]

    operations = [migrations.RunPython(redact, migrations.RunPython.noop, elidable=True)]
