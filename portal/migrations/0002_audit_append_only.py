"""The audit log is append-only in the database too (PostgreSQL): UPDATE and DELETE are
refused, except clearing the actor when a user account is deleted (on_delete SET_NULL)."""

from django.db import migrations

from portal.migration_sql import postgresql_only

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
    dependencies = [("portal", "0001_initial")]

    operations = [postgresql_only(GUARD, DROP)]
