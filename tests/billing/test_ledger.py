"""The ledger: balanced, append-only, reversible only by a linked reversal, derived balances."""

from collections import defaultdict
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils.html import strip_tags
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from billing.domain.invoices import InvoiceError
from billing.models import Invoice, InvoiceLine, LedgerTransaction, Posting
from billing.selectors.ledger import account_balances
from billing.services.invoices.collect import invoice_pay
from billing.services.invoices.issue import invoice_finalize, invoice_void
from billing.services.ledger import (
    LedgerError,
    Leg,
    account_named,
    account_receivable,
    account_revenue,
    ledger_post,
    ledger_reverse,
)
from portal import clock
from portal.models import Tenant
from tests.billing.factories import APRIL, MARCH, make_priced_model
from tests.concurrency import run_together
from tests.conftest import SOAK

CENTS = st.integers(min_value=1, max_value=10_000_00).map(lambda c: Decimal(c) / 100)


def _check_deferred_constraints():
    """Run PostgreSQL's deferred balance check now instead of at commit."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def _draft(tenant, lines, *, month=MARCH):
    total = sum(amount for _, _, _, amount in lines)
    invoice = Invoice.objects.create(
        tenant=tenant, period_start=month, period_end=APRIL, currency="USD", total=total
    )
    InvoiceLine.objects.bulk_create(
        InvoiceLine(
            invoice=invoice,
            position=position,
            kind=kind,
            model="llama-70b" if kind == "usage" else "",
            list_amount=list_amount,
            discount=discount,
            amount=amount,
            description=kind,
            for_month=month,
        )
        for position, (kind, list_amount, discount, amount) in enumerate(lines, start=1)
    )
    return invoice


class LedgerMachine(RuleBasedStateMachine):
    """Post, reverse, credit and invoice in any order: every transaction balances, balances
    rebuilt from postings equal the running model, and the database agrees at each step."""

    transactions = Bundle("transactions")

    def __init__(self):
        super().__init__()
        self._atomic = transaction.atomic()
        self._atomic.__enter__()
        self.tenant, _ = Tenant.objects.get_or_create(slug="ledger-t", defaults={"name": "T"})
        self.accounts = [
            account_named("cash"),
            account_receivable(tenant=self.tenant),
            account_revenue(model_slug="llama-70b"),
            account_named("contra:discounts"),
            account_named("expense:promotions"),
        ]
        self.expected = defaultdict(Decimal)
        self.months = iter(range(1, 1000))

    def teardown(self):
        transaction.set_rollback(True)
        self._atomic.__exit__(None, None, None)

    def _record(self, entry):
        for posting in entry.postings.all():
            self.expected[posting.account.code] += posting.amount

    @rule(target=transactions, data=st.data(), size=st.integers(min_value=2, max_value=4))
    def post(self, data, size):
        picks = data.draw(st.lists(st.sampled_from(self.accounts), min_size=size, max_size=size))
        amounts = [data.draw(CENTS) * data.draw(st.sampled_from([1, -1])) for _ in picks[1:]]
        legs = [Leg(account, amount) for account, amount in zip(picks[1:], amounts, strict=True)]
        legs.append(Leg(picks[0], -sum(amounts)))
        try:
            entry = ledger_post(kind="manual", memo="test", legs=legs, currency="USD")
        except LedgerError:  # refused only when the legs cancel out on every account
            net = defaultdict(Decimal)
            for leg in legs:
                net[leg.account.pk] += leg.amount
            assert set(net.values()) == {Decimal(0)}, legs
            return None
        self._record(entry)
        return entry

    @rule(amount=CENTS, skew=CENTS)
    def post_unbalanced(self, amount, skew):
        before = Posting.objects.count()
        with pytest.raises(LedgerError, match="does not balance"):
            ledger_post(
                kind="manual",
                memo="bad",
                legs=[Leg(self.accounts[0], amount), Leg(self.accounts[1], -amount - skew)],
                currency="USD",
            )
        assert Posting.objects.count() == before

    @rule(entry=transactions)
    def reverse(self, entry):
        if entry is None:
            return
        if entry.kind == "reversal" or LedgerTransaction.objects.filter(reverses=entry).exists():
            with pytest.raises(LedgerError):
                ledger_reverse(entry=entry, memo="again")
            return
        self._record(ledger_reverse(entry=entry, memo="reversal"))

    @rule(target=transactions, amount=CENTS)
    def sla_credit(self, amount):
        entry = ledger_post(
            kind="sla_credit",
            memo="credit",
            legs=[
                Leg(account_named("contra:sla-credits"), amount),
                Leg(account_receivable(tenant=self.tenant), -amount),
            ],
            currency="USD",
        )
        self._record(entry)
        return entry

    @rule(list_amount=CENTS, pct=st.integers(min_value=0, max_value=100), promo=CENTS,
          pay=st.booleans(), void=st.booleans())  # fmt: skip
    def invoice(self, list_amount, pct, promo, pay, void):
        amount = (list_amount * (100 - pct) / 100).quantize(Decimal("0.01"))
        promo = min(promo, amount)
        lines = [("usage", list_amount, list_amount - amount, amount)]
        if promo:
            lines.append(("promotion", Decimal("0.00"), promo, -promo))
        if amount - promo == 0:
            return
        index = next(self.months)  # one invoice per month
        month = datetime(2000 + index // 12, index % 12 + 1, 1, tzinfo=UTC)
        invoice = invoice_finalize(invoice=_draft(self.tenant, lines, month=month))
        self._record(invoice.issue_transaction)
        if void:
            invoice_void(invoice=invoice, reason="test")
            self._record(LedgerTransaction.objects.get(reverses=invoice.issue_transaction))
        elif pay:
            invoice_pay(invoice=invoice)
            self._record(LedgerTransaction.objects.filter(kind="payment").latest("id"))

    @invariant()
    def every_transaction_balances(self):
        unbalanced = [
            entry.pk
            for entry in LedgerTransaction.objects.prefetch_related("postings")
            if sum(p.amount for p in entry.postings.all()) != 0
        ]
        assert unbalanced == []
        _check_deferred_constraints()

    @invariant()
    def balances_rebuild_from_postings(self):
        derived = {code: total for (code, _), total in account_balances().items() if total}
        assert derived == {code: total for code, total in self.expected.items() if total}


@pytest.mark.both_backends
def test_ledger_state_machine_keeps_every_transaction_balanced(db):
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        LedgerMachine,
        settings=settings(
            max_examples=30 if SOAK else 12,  # about 0.3 s of CPU each, on both backends
            stateful_step_count=15,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )


@pytest.fixture
def entry(db):
    tenant = Tenant.objects.create(slug="t", name="T")
    return ledger_post(
        kind="manual",
        memo="opening",
        legs=[
            Leg(account_named("cash"), Decimal("10.00")),
            Leg(account_receivable(tenant=tenant), Decimal("-10.00")),
        ],
        currency="USD",
    )


@pytest.mark.both_backends
def test_a_key_is_posted_once(db):
    legs = [
        Leg(account_named("cash"), Decimal("5.00")),
        Leg(account_named("revenue:adjustments"), Decimal("-5.00")),
    ]
    first = ledger_post(kind="manual", memo="m", legs=legs, currency="USD", idempotency_key="k1")

    with pytest.raises(LedgerError, match=f"'k1' is already posted as transaction #{first.pk}"):
        ledger_post(kind="manual", memo="m", legs=legs, currency="USD", idempotency_key="k1")
    assert LedgerTransaction.objects.count() == 1


@pytest.mark.both_backends
def test_posted_rows_refuse_update_and_delete_through_the_orm(entry):
    posting = entry.postings.first()
    posting.amount = Decimal("99.00")
    with pytest.raises(PermissionError):
        posting.save()
    with pytest.raises(PermissionError):
        posting.delete()
    with pytest.raises(PermissionError):
        Posting.objects.filter(pk=posting.pk).update(amount=Decimal("1.00"))
    with pytest.raises(PermissionError):
        Posting.objects.all().delete()
    with pytest.raises(PermissionError):
        LedgerTransaction.objects.filter(pk=entry.pk).update(memo="rewritten")
    assert sorted(Posting.objects.values_list("amount", flat=True)) == [
        Decimal("-10.00"),
        Decimal("10.00"),
    ]


@pytest.mark.postgres_only
@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE billing_posting SET amount = 99",
        "DELETE FROM billing_posting",
        "UPDATE billing_ledgertransaction SET memo = 'rewritten'",
        "DELETE FROM billing_ledgertransaction",
    ],
)
def test_posted_rows_refuse_update_and_delete_through_sql(entry, sql):
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(sql)
    assert Posting.objects.filter(transaction=entry).count() == 2


@pytest.mark.postgres_only
def test_database_refuses_an_unbalanced_transaction(entry):
    with pytest.raises(DatabaseError, match="does not balance"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO billing_posting (transaction_id, account_id, amount, currency)"
                " SELECT %s, account_id, 5, 'USD' FROM billing_posting LIMIT 1",
                [entry.pk],
            )
        _check_deferred_constraints()
    assert Posting.objects.filter(transaction=entry).count() == 2


@pytest.mark.postgres_only
def test_issued_invoice_cannot_change_in_the_database(db):
    tenant = Tenant.objects.create(slug="t", name="T")
    lines = [("usage", Decimal("10.00"), Decimal("1.00"), Decimal("9.00"))]
    invoice = invoice_finalize(invoice=_draft(tenant, lines))
    for sql in (
        "UPDATE billing_invoice SET total = 0",
        "UPDATE billing_invoice SET number = 'INV-X'",
        "DELETE FROM billing_invoice",
        "UPDATE billing_invoiceline SET amount = 0",
    ):
        with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql)
    invoice.refresh_from_db()
    assert (invoice.total, invoice.status) == (Decimal("9.00"), "issued")


@pytest.mark.both_backends
def test_void_posts_a_linked_reversal(db):
    tenant = Tenant.objects.create(slug="t", name="T")
    lines = [("usage", Decimal("10.00"), Decimal("1.00"), Decimal("9.00"))]
    invoice = invoice_finalize(invoice=_draft(tenant, lines))

    invoice_void(invoice=invoice, reason="wrong contract")

    invoice.refresh_from_db()
    reversal = LedgerTransaction.objects.get(reverses=invoice.issue_transaction)
    assert invoice.status == "void"
    assert reversal.memo == f"Void of {invoice.number}: wrong contract"
    assert all(total == 0 for total in account_balances().values())
    with pytest.raises(LedgerError, match="already reversed"):
        ledger_reverse(entry=invoice.issue_transaction, memo="twice")


@pytest.mark.both_backends
def test_invoice_finalize_refuses_an_issued_invoice_as_a_conflict(db):
    tenant = Tenant.objects.create(slug="t", name="T")
    lines = [("usage", Decimal("10.00"), Decimal("1.00"), Decimal("9.00"))]
    invoice = invoice_finalize(invoice=_draft(tenant, lines))
    postings = Posting.objects.count()

    with pytest.raises(InvoiceError) as refused:
        invoice_finalize(invoice=invoice)

    assert refused.value.http_status == 409
    assert str(refused.value) == f"invoice {invoice.number} is issued; only a draft is finalized"
    assert Posting.objects.count() == postings
    invoice.refresh_from_db()
    assert (invoice.status, invoice.number) == ("issued", f"INV-{clock.now().year}-000001")


@pytest.mark.postgres_only
def test_concurrent_finalizations_number_invoices_without_gaps(transactional_db):
    tenants = [Tenant.objects.create(slug=f"t{i:02d}", name=f"T{i}") for i in range(20)]
    lines = [("usage", Decimal("10.00"), Decimal("0.00"), Decimal("10.00"))]
    drafts = [_draft(tenant, lines) for tenant in tenants]

    _, errors = run_together(lambda draft: invoice_finalize(invoice=draft), drafts)

    assert errors == []
    year = clock.now().year
    numbers = sorted(Invoice.objects.values_list("number", flat=True))
    assert numbers == [f"INV-{year}-{n:06d}" for n in range(1, 21)]


@pytest.mark.both_backends
def test_postings_count_on_their_accounting_date(db, users):
    """kpis.md, Accounting dates: the March invoice, issued and paid mid-December, counts
    in March (accrual); its payment counts the day it came. Ledger views filter by it."""
    from billing.selectors.ledger import ledger_postings
    from portal.periods import Period

    tenant = Tenant.objects.create(slug="t", name="T")
    lines = [("usage", Decimal("10.00"), Decimal("1.00"), Decimal("9.00"))]
    invoice = invoice_finalize(invoice=_draft(tenant, lines))
    invoice_pay(invoice=invoice)

    dates = dict(LedgerTransaction.objects.values_list("kind", "accounting_date"))
    march = ledger_postings(user=users["finance"], period=Period(MARCH, APRIL))
    december = ledger_postings(
        user=users["finance"],
        period=Period(datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)),
    )

    assert {k: d.isoformat() for k, d in dates.items()} == {
        "invoice": "2026-03-31",
        "payment": clock.now().date().isoformat(),
    }
    assert {p.transaction.kind for p in march} == {"invoice"}
    assert {p.transaction.kind for p in december} == {"payment"}


@pytest.mark.both_backends
def test_a_closed_month_accepts_no_posting_dated_in_it(db):
    """Once March is closed nothing is dated in it: a posting asking for a March date is
    refused naming accounting_date, and a March invoice issued late (after a void, say)
    counts on the day it is issued, like a credit note."""
    from portal.closing import month_close
    from portal.errors import FieldError

    tenant = Tenant.objects.create(slug="t", name="T")
    month_close(month=MARCH)
    before = Posting.objects.count()

    with pytest.raises(FieldError) as refused:
        ledger_post(
            kind="manual",
            memo="into March",
            legs=[
                Leg(account_named("cash"), Decimal(1)),
                Leg(account_receivable(tenant=tenant), Decimal(-1)),
            ],
            currency="USD",
            accounting_date=datetime(2026, 3, 31, tzinfo=UTC).date(),
        )
    assert refused.value.field == "accounting_date"
    assert Posting.objects.count() == before

    invoice = invoice_finalize(
        invoice=_draft(tenant, [("usage", Decimal(10), Decimal(1), Decimal(9))])
    )
    assert invoice.issue_transaction.accounting_date == clock.now().date()


def test_the_ledger_page_shows_opening_movement_and_closing_balances(
    tenant_a, users, session_client, now
):
    """Receivable of tenant-a: 100.00 invoiced on 31 October; in November 250.00 invoiced
    and 100.00 paid: opening 100.00, movement 150.00, closing 250.00 (never the movement
    read as the balance); revenue is credit-normal: −100.00, −250.00, −350.00."""
    make_priced_model()
    receivable, revenue = (
        account_receivable(tenant=tenant_a),
        account_revenue(model_slug="llama-70b"),
    )
    cash = account_named("cash")
    for day, amount, debit, credit in (
        (date(2026, 10, 31), Decimal("100.00"), receivable, revenue),
        (date(2026, 11, 5), Decimal("250.00"), receivable, revenue),
        (date(2026, 11, 20), Decimal("100.00"), cash, receivable),
    ):
        ledger_post(kind="invoice", memo=f"{day}", currency="USD", tenant=tenant_a,
                    legs=[Leg(debit, amount), Leg(credit, -amount)], accounting_date=day)  # fmt: skip
    client = session_client(users["finance"])

    page = client.get("/billing/ledger/?period=2026-11").content.decode()

    balances = page[page.index('aria-label="Balances"') : page.index('aria-label="Postings"')]
    rows = {}
    for row in balances.split("<tr>")[2:]:
        cells = [strip_tags(cell).strip() for cell in row.split("</td>")[:-1]]
        rows[cells[0]] = cells[3:]
    assert rows == {
        "receivable:tenant-a": ["100.00", "150.00", "250.00"],
        "revenue:llama-70b": ["-100.00", "-250.00", "-350.00"],
        "cash": ["0.00", "100.00", "100.00"],
    }
    # The postings listed are the period's; the balances count what came before.
    assert page.count("2026-10-31") == 0


def test_the_ledger_page_names_an_account_before_its_first_posting(tenant_a, users, session_client):
    """Accounts are made by their first posting: `?account=cash` before any payment lists no
    posting (as the API does) and its filter says so, not "All accounts"."""
    make_priced_model()
    receivable, revenue = (
        account_receivable(tenant=tenant_a),
        account_revenue(model_slug="llama-70b"),
    )
    ledger_post(kind="invoice", memo="March", currency="USD", tenant=tenant_a,
                legs=[Leg(receivable, Decimal(5)), Leg(revenue, Decimal(-5))])  # fmt: skip
    client = session_client(users["finance"])

    page = client.get("/billing/ledger/?account=cash").content.decode()
    every = client.get("/billing/ledger/").content.decode()

    assert '<option value="cash" selected>cash (no postings)</option>' in page
    assert "No postings in this period." in page
    assert "(no postings)" not in every
    assert '<option value="receivable:tenant-a">' in every
