"""Credit notes, the credit balance and aged receivables (kpis.md "Credit notes, balances and
receivables"), with hand-computed figures."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils.html import escape
from rest_framework.test import APIClient

from billing.models import CreditNote, Invoice, InvoiceLine, Posting
from billing.selectors.balances import credit_balance
from billing.selectors.close import close_report
from billing.selectors.ledger import account_balances
from billing.selectors.receivables import aged_receivables
from billing.services.close import close_run
from billing.services.credit_notes import credit_note_issue
from billing.services.invoices.collect import invoice_pay
from billing.services.invoices.issue import invoice_finalize
from portal.errors import FieldError
from portal.models import Tenant
from tests.billing.factories import APRIL, MARCH, M, assert_refused, make_march_invoice, post_usage
from tests.concurrency import run_together

pytestmark = pytest.mark.both_backends


@pytest.fixture
def paid_march(admin_api, tenant_a):
    """tenant-a's March: 10 M in + 10 M out at 0.88, 10% off: lines 7.92 (input) and 7.92
    (output), total 15.84; closed and paid in full."""
    invoice = make_march_invoice(admin_api, tenant_a, discount_pct=Decimal(10))
    return invoice_pay(invoice=invoice, paid_at=datetime(2026, 4, 10, tzinfo=UTC))


def _balanced() -> bool:
    return sum(account_balances().values(), Decimal(0)) == 0


def test_a_credit_note_on_two_lines_of_a_paid_invoice_goes_to_the_balance(
    admin_api, finance, paid_march
):
    lines = list(paid_march.lines.order_by("position"))
    assert [(line.token_class, line.amount) for line in lines] == [
        ("input", Decimal("7.92")),
        ("output", Decimal("7.92")),
    ]
    before = (
        Invoice.objects.get(pk=paid_march.pk).status,
        paid_march.total,
        InvoiceLine.objects.count(),
    )

    response = finance.post(
        "/api/v1/credit-notes",
        {
            "invoice": paid_march.number,
            "reason": "dispute",
            "settle": "balance",
            "lines": [
                {"line": lines[0].pk, "amount": "2.00"},
                {"line": lines[1].pk, "amount": "1.50"},
            ],
        },
        format="json",
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["number"], body["invoice"], body["total"], body["reduced"], body["settled"]) == (
        "CN-2026-000001", paid_march.number, "3.50", "0.00", "3.50",
    )  # fmt: skip
    assert [(line["line"], line["amount"]) for line in body["lines"]] == [
        (lines[0].pk, "2.00"),
        (lines[1].pk, "1.50"),
    ]
    invoice = Invoice.objects.get(pk=paid_march.pk)
    assert (invoice.status, invoice.total, InvoiceLine.objects.count()) == before
    assert credit_balance(tenant=paid_march.tenant) == Decimal("3.50")
    assert _balanced()
    note_postings = dict(
        Posting.objects.filter(transaction__kind="credit_note").values_list(
            "account__code", "amount"
        )
    )
    assert note_postings == {
        "contra:credit-notes": Decimal("3.50"),
        "liability:credit-balance:tenant-a": Decimal("-3.50"),
    }
    listed = finance.get(f"/api/v1/invoices/{paid_march.pk}").json()
    assert (listed["credited"], listed["outstanding"], listed["days_overdue"]) == (
        "3.50",
        "0.00",
        0,
    )

    # April: 1 M in + 1 M out, lines 0.79 + 0.79 = 1.58, all of it drawn from the balance.
    april = {"time": "2026-04-02T00:00:00Z", "input_tokens": M, "output_tokens": M}
    post_usage(admin_api, [{"id": "a2", **april}])
    [next_invoice] = close_run(month_start=APRIL).issued
    assert [(line.kind, line.amount) for line in next_invoice.lines.all()] == [
        ("usage", Decimal("0.79")),
        ("usage", Decimal("0.79")),
        ("credit", Decimal("-1.58")),
    ]
    assert (next_invoice.total, next_invoice.status) == (Decimal("0.00"), "paid")
    assert credit_balance(tenant=paid_march.tenant) == Decimal("1.92")
    assert _balanced()
    assert close_report(month=APRIL).is_balanced


def test_an_over_large_credit_note_is_refused_naming_amount(finance, paid_march):
    response = finance.post(
        "/api/v1/credit-notes",
        {"invoice": paid_march.number, "reason": "goodwill", "amount": "15.85"},
        format="json",
    )

    assert_refused(
        response,
        400,
        "amount",
        f"exceeds what is left to credit on {paid_march.number}: 15.84 USD "
        "(total 15.84 USD, 0.00 USD credited before)",
    )
    assert not CreditNote.objects.exists() and _balanced()


def test_the_invoice_page_refuses_a_credit_note_as_the_api_does_keeping_the_form(
    finance, paid_march
):
    """The same over-large credit note from the invoice's page: a 400 with the API's message
    beside the form, the amount, reason, settlement and memo kept; nothing issued."""
    api = finance.post(
        "/api/v1/credit-notes",
        {"invoice": paid_march.number, "reason": "goodwill", "settle": "refund", "amount": "15.85"},
        format="json",
    ).json()["errors"][0]
    page = finance.post(
        f"/billing/invoices/{paid_march.pk}/credit/",
        {"amount": "15.85", "reason": "goodwill", "settle": "refund", "memo": "March outage"},
        format="multipart",  # a form's post
    )

    assert page.status_code == 400
    body = page.content.decode()
    message = escape(f"{api['field']}: {api['message']}")
    assert f'<p class="error" id="cn-error" role="alert">{message}</p>' in body
    assert 'value="15.85" aria-invalid="true"' in body and 'value="March outage"' in body
    assert '<option value="goodwill" selected>' in body
    assert '<option value="refund" selected>' in body
    assert not CreditNote.objects.exists() and _balanced()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reason": "oops", "amount": "1.00"}, "reason"),
        ({"reason": "dispute", "settle": "cheque", "amount": "1.00"}, "settle"),
        ({"reason": "dispute"}, "amount"),
        ({"reason": "dispute", "amount": "1.001"}, "amount"),
        ({"reason": "dispute", "amount": "-1"}, "amount"),
        ({"reason": "dispute", "lines": [{"line": 999999, "amount": "1.00"}]}, "lines[0].line"),
    ],
)
def test_bad_credit_notes_are_refused_naming_the_field(finance, paid_march, body, field):
    response = finance.post(
        "/api/v1/credit-notes", {"invoice": paid_march.number, **body}, format="json"
    )
    assert response.status_code == 400, response.json()
    assert response.json()["errors"][0]["field"] == field
    assert not CreditNote.objects.exists()


def test_a_line_is_never_credited_past_its_amount(paid_march):
    line = paid_march.lines.first()
    credit_note_issue(invoice=paid_march, reason="sla", settle="refund",
                      lines=[{"line": line.pk, "amount": "7.00"}])  # fmt: skip
    with pytest.raises(FieldError) as refused:
        credit_note_issue(invoice=paid_march, reason="sla", settle="refund",
                          lines=[{"line": line.pk, "amount": "1.00"}])  # fmt: skip
    assert refused.value.field == "lines[0].amount"
    assert "0.92" in refused.value.message


def test_a_credit_note_first_reduces_what_is_outstanding(admin_api, tenant_a):
    invoice = make_march_invoice(admin_api, tenant_a, discount_pct=Decimal(10))  # 15.84, unpaid

    first = credit_note_issue(
        invoice=invoice, reason="billing_error", settle="refund", amount="5.00"
    )
    assert (first.reduced, first.settled) == (Decimal("5.00"), Decimal("0"))
    paid = invoice_pay(invoice=invoice)
    assert paid.paid_amount == Decimal("10.84")  # the cash that came in
    second = credit_note_issue(invoice=invoice, reason="goodwill", settle="refund", amount="2.00")
    assert (second.reduced, second.settled) == (Decimal("0"), Decimal("2.00"))
    cash = sum(Posting.objects.filter(account__code="cash").values_list("amount", flat=True))
    assert cash == Decimal("8.84")  # 10.84 in, 2.00 refunded
    assert _balanced()
    assert [n.number for n in CreditNote.objects.order_by("number")] == [
        "CN-2026-000001",
        "CN-2026-000002",
    ]


@pytest.mark.postgres_only
def test_concurrent_credit_notes_are_numbered_without_a_gap(transactional_db):
    from billing.models import InvoiceLine as Line

    invoices = []
    for i in range(12):
        tenant = Tenant.objects.create(slug=f"t{i:02d}", name=f"T{i}")
        invoice = Invoice.objects.create(
            tenant=tenant, period_start=MARCH, period_end=APRIL, currency="USD",
            total=Decimal("10.00"),
        )  # fmt: skip
        Line.objects.create(
            invoice=invoice, position=1, kind="minimum", list_amount=Decimal("10.00"),
            discount=Decimal(0), amount=Decimal("10.00"), description="minimum", for_month=MARCH,
        )  # fmt: skip
        invoices.append(invoice_finalize(invoice=invoice))

    _, errors = run_together(
        lambda invoice: credit_note_issue(
            invoice=invoice, reason="goodwill", settle="balance", amount="1.00"
        ),
        invoices,
    )

    assert errors == []
    numbers = sorted(CreditNote.objects.values_list("number", flat=True))
    assert numbers == [f"CN-2026-{n:06d}" for n in range(1, 13)]


def _issued(tenant, *, number: str, total: str, issued: date, due_days: int = 30):
    """An issued invoice of the month before `issued`."""
    issued_at = datetime.combine(issued, datetime.min.time(), tzinfo=UTC) + timedelta(hours=2)
    month = datetime(issued.year, issued.month, 1, tzinfo=UTC) - timedelta(days=1)
    start = month.replace(day=1, hour=0)
    invoice = Invoice.objects.create(
        tenant=tenant, period_start=start, period_end=start + timedelta(days=28), currency="USD",
        total=Decimal(total), status="issued", number=number, issued_at=issued_at,
        due_at=issued_at + timedelta(days=due_days),
    )  # fmt: skip
    return invoice


def test_aged_receivables_as_of_a_day(db, users):
    """Hand-made invoices, payments and credit notes at a fixed as_of (1 August 2026):
    outstanding = total − payments − credit notes dated by then, aged past the due day."""
    a = Tenant.objects.create(slug="alpha", name="Alpha")
    b = Tenant.objects.create(slug="beta", name="Beta")
    as_of = date(2026, 8, 1)
    # Due 1 Aug: current (the due day itself).
    _issued(a, number="INV-2026-000101", total="100.00", issued=date(2026, 7, 2))
    # Due 2 Jul: 30 days past due -> 1–30.
    _issued(a, number="INV-2026-000102", total="200.00", issued=date(2026, 6, 2))
    # Due 1 Jul: 31 days -> 31–60; 50.00 of it credited on 20 Jul, 25.00 more after as_of.
    late = _issued(b, number="INV-2026-000103", total="300.00", issued=date(2026, 6, 1))
    # Due 2 May: 91 days -> 90+; paid 5 Aug (after as_of): still outstanding then.
    old = _issued(b, number="INV-2026-000104", total="400.00", issued=date(2026, 4, 2))
    Invoice.objects.filter(pk=old.pk).update(
        status="paid", paid_at=datetime(2026, 8, 5, tzinfo=UTC), paid_amount=Decimal("400.00")
    )
    # Due 3 Jun: 59 days -> 31–60 were it open; paid 1 Jul: nothing outstanding.
    paid = _issued(b, number="INV-2026-000105", total="500.00", issued=date(2026, 5, 4))
    Invoice.objects.filter(pk=paid.pk).update(
        status="paid", paid_at=datetime(2026, 7, 1, tzinfo=UTC), paid_amount=Decimal("500.00")
    )
    # Issued after as_of: not yet a receivable.
    _issued(b, number="INV-2026-000106", total="600.00", issued=date(2026, 8, 2))
    _note(late, "50.00", datetime(2026, 7, 20, tzinfo=UTC), "CN-2026-000101")
    _note(late, "25.00", datetime(2026, 8, 3, tzinfo=UTC), "CN-2026-000102")

    rows = aged_receivables(user=users["finance"], as_of=as_of)

    assert [(r.tenant.slug, {k: v for k, v in r.buckets.items() if v}) for r in rows] == [
        ("alpha", {"current": Decimal("100.00"), "days_1_30": Decimal("200.00")}),
        ("beta", {"days_31_60": Decimal("250.00"), "days_over_90": Decimal("400.00")}),
    ]
    assert [r.total for r in rows] == [Decimal("300.00"), Decimal("650.00")]


def _note(invoice, amount: str, at: datetime, number: str) -> None:
    """A credit note reducing `invoice` by `amount` on `at` (rows as the service leaves
    them; the ledger is not what this test reads)."""
    from billing.models import LedgerTransaction

    entry = LedgerTransaction.objects.create(
        kind="credit_note", memo=number, occurred_at=at, accounting_date=at.date()
    )
    CreditNote.objects.create(
        number=number, tenant=invoice.tenant, invoice=invoice, period_start=MARCH,
        reason="dispute", settle="balance", currency="USD", total=Decimal(amount),
        reduced=Decimal(amount), settled=Decimal(0), issued_at=at, transaction=entry,
    )  # fmt: skip


def test_receivables_api_and_its_access(finance, users, db):
    t = Tenant.objects.create(slug="gamma", name="Gamma")
    _issued(t, number="INV-2026-000201", total="10.00", issued=date(2026, 1, 2))

    response = finance.get("/api/v1/receivables?as_of=2026-03-15")

    assert response.status_code == 200
    assert response.json() == {
        "as_of": "2026-03-15",
        "results": [
            {"tenant": "gamma", "current": "0.00", "days_1_30": "0.00", "days_31_60": "10.00",
             "days_61_90": "0.00", "days_over_90": "0.00", "total": "10.00"}
        ],
    }  # fmt: skip
    bad = finance.get("/api/v1/receivables?as_of=2026-02-30")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "as_of"
    # The page and its CSV refuse it alike, never showing today's figures in its place.
    for query in ("as_of=2026-02-30", "as_of=2026-02-30&format=csv"):
        page = finance.get(f"/billing/receivables/?{query}")
        assert page.status_code == 400, query
        assert "as_of: is not a possible date" in page.content.decode(), query
    member = APIClient()
    member.force_login(users["tenant"])
    assert member.get("/api/v1/receivables").status_code == 403
