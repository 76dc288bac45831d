"""PostgreSQL guards of the ledger: balanced transactions, append-only rows, frozen invoices.

SQLite relies on the services and the models (the architecture makes these guarantees
PostgreSQL-only)."""

from django.db import migrations

from portal.migration_sql import postgresql_only

GUARDS = """
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

DROP = """
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


class Migration(migrations.Migration):
    dependencies = [("billing", "0001_initial")]

    operations = [postgresql_only(GUARDS, DROP)]
