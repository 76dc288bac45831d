"""The close report of a month (architecture.md, `GET /api/v1/close/<YYYY-MM>`): its steps,
the month's rating now against what was invoiced and carried to later invoices, the
ledger's revenue against the revenue of the month's documents, and a trial balance. A
difference is shown, never hidden; billing does not read flywheel (TFOM's own tie-out is
on the TFOM report)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.db.models import Q

from billing.domain.accounts import line_leg_codes
from billing.domain.invoices import BILLED_KINDS
from billing.domain.rating.types import LineKind
from billing.models import (
    Account,
    CloseStep,
    CreditNote,
    CreditNoteLine,
    Invoice,
    InvoiceLine,
    LedgerTransaction,
    MonthClose,
    Posting,
    PrepaidBreakage,
    RatedTenantMonth,
    SlaCredit,
)
from billing.selectors.ledger import PROMOTIONS_ACCOUNT, REVENUE_KINDS, account_balances
from billing.selectors.rating.inputs import line_of
from portal.closing import month_is_closed
from portal.formatting import money_text
from portal.periods import month_last_day

ZERO = Decimal(0)


@dataclass(frozen=True)
class CloseReport:
    month: datetime
    status: str  # open | running | closed
    close: MonthClose | None
    steps: list[CloseStep]  # each with `text`: what it did, in words
    rated: Decimal  # the month's rating now, unrounded
    invoiced: Decimal  # its documents' usage, promotion and minimum lines
    carried: Decimal  # adjustments for it on later invoices
    uncarried: Decimal  # late usage rated since, for the next invoice to carry
    rounding: Decimal  # rated − invoiced − carried − uncarried: line rounding only
    rating_errors: dict[str, str]  # tenant slug -> why its month cannot be rated
    ledger_revenue: dict[str, Decimal]  # revenue postings dated in the month, by account
    document_revenue: dict[str, Decimal]  # the same from the month's documents
    trial_balance: list[tuple[str, Decimal, Decimal]]  # account, debit, credit (to month end)

    @property
    def revenue_difference(self) -> dict[str, Decimal]:
        accounts = set(self.ledger_revenue) | set(self.document_revenue)
        return {
            code: self.ledger_revenue.get(code, ZERO) - self.document_revenue.get(code, ZERO)
            for code in sorted(accounts)
            if self.ledger_revenue.get(code, ZERO) != self.document_revenue.get(code, ZERO)
        }

    @property
    def is_balanced(self) -> bool:
        debits = sum((debit for _, debit, _ in self.trial_balance), ZERO)
        credits = sum((credit for _, _, credit in self.trial_balance), ZERO)
        return debits == credits and not self.revenue_difference


def _status(month: datetime, close: MonthClose | None) -> str:
    """open (not locked: no close yet, or one stopped before its lock), running (locked, its
    steps not all done), closed."""
    if not month_is_closed(month):
        return "open"
    return "running" if close is not None and close.finished_at is None else "closed"


def month_close_state(month: datetime) -> tuple[str, MonthClose | None]:
    """A month's close status (open, running or closed) and its close, when one ran."""
    close = MonthClose.objects.filter(month=month).first()
    return _status(month, close), close


def _sum(values) -> Decimal:
    return sum(values, ZERO)  # in Python: SQLite would sum decimals as floats


def _rating(month: datetime) -> tuple[Decimal, Decimal, dict[str, str]]:
    """(the month's rating now, unrounded; the same in rounded lines; rating errors)."""
    rated = rounded = ZERO
    errors = {}
    for row in RatedTenantMonth.objects.filter(month_start=month).select_related("tenant"):
        if row.error:
            errors[row.tenant.slug] = row.error
            continue
        # On demand as realized, and the reservation lines' fees (each rounded once: the
        # covered usage they pay for is not in `realized`).
        rated += (
            Decimal(row.realized) - Decimal(row.promotions) + row.minimum_shortfall
            + row.reserved_amount
        )  # fmt: skip
        rounded += _sum(line_of(line).amount for line in row.lines)
    return rated, rounded, errors


def _billed(month: datetime) -> tuple[Decimal, Decimal]:
    """(what the month's documents billed of its rating; adjustments carried for it)."""
    invoiced = _sum(
        InvoiceLine.objects.filter(
            invoice__status__in=Invoice.LIVE,
            invoice__kind=Invoice.Kind.USAGE,
            invoice__period_start=month,
            kind__in=BILLED_KINDS,
        ).values_list("amount", flat=True)
    ) + _sum(
        CreditNoteLine.objects.filter(
            credit_note__invoice=None, credit_note__period_start=month, kind__in=BILLED_KINDS
        ).values_list("amount", flat=True)
    )
    carried = _sum(
        InvoiceLine.objects.filter(
            invoice__status__in=Invoice.LIVE, kind=LineKind.ADJUSTMENT, for_month=month
        ).values_list("amount", flat=True)
    ) + _sum(
        CreditNoteLine.objects.filter(
            credit_note__invoice=None, kind=LineKind.ADJUSTMENT, for_month=month
        ).values_list("amount", flat=True)
    )
    return invoiced, carried


def _revenue_accounts() -> Q:
    return Q(account__kind__in=REVENUE_KINDS) | Q(account__code=PROMOTIONS_ACCOUNT)


def _ledger_revenue(first: date, last: date) -> dict[str, Decimal]:
    postings = Posting.objects.filter(
        _revenue_accounts(),
        transaction__accounting_date__gte=first,
        transaction__accounting_date__lte=last,
    )
    return {
        code: -amount
        for (code, _), amount in account_balances(postings=postings).items()
        if amount != 0
    }


def _dated(entries, first: date, last: date):
    return entries.filter(accounting_date__gte=first, accounting_date__lte=last)


def _document_revenue(first: date, last: date) -> dict[str, Decimal]:
    """Revenue by account built from the documents dated in the month: invoice lines (less
    the lines of invoices voided in it), netted months' credit notes, the SLA credits it
    earned, credit notes issued in it, breakage of prepaid balances expiring in it."""
    revenue: dict[str, Decimal] = defaultdict(lambda: ZERO)
    kinds = dict(Account.objects.values_list("code", "kind"))  # the accounts posted to exist

    def add(tenant, lines, sign: int) -> None:
        for line in lines:
            for code, amount in line_leg_codes(
                tenant_slug=tenant.slug, kind=line.kind, model=line.model,
                list_amount=line.list_amount, discount=line.discount, amount=line.amount,
            ):  # fmt: skip
                if kinds.get(code) in REVENUE_KINDS or code == PROMOTIONS_ACCOUNT:
                    revenue[code] -= sign * amount

    issued = _dated(LedgerTransaction.objects.filter(kind="invoice"), first, last)
    for invoice in Invoice.objects.filter(issue_transaction__in=issued).select_related("tenant"):
        add(invoice.tenant, invoice.lines.all(), 1)
    voided = _dated(
        LedgerTransaction.objects.filter(reverses__kind="invoice"), first, last
    ).values_list("reverses_id", flat=True)
    for invoice in Invoice.objects.filter(issue_transaction__in=voided).select_related("tenant"):
        add(invoice.tenant, invoice.lines.all(), -1)
    notes = CreditNote.objects.filter(
        transaction__accounting_date__gte=first, transaction__accounting_date__lte=last
    ).select_related("tenant")
    for note in notes:
        if note.invoice_id is None:
            add(note.tenant, note.lines.all(), 1)
        else:
            revenue["contra:credit-notes"] -= note.total
    for amount in PrepaidBreakage.objects.filter(
        transaction__accounting_date__gte=first, transaction__accounting_date__lte=last
    ).values_list("amount", flat=True):
        revenue["revenue:breakage"] += amount
    for amount in SlaCredit.objects.filter(
        transaction__accounting_date__gte=first, transaction__accounting_date__lte=last
    ).values_list("amount", flat=True):
        revenue["contra:sla-credits"] -= amount
    return {code: amount for code, amount in sorted(revenue.items()) if amount != 0}


def _trial_balance(last: date) -> list[tuple[str, Decimal, Decimal]]:
    balances = account_balances(
        postings=Posting.objects.filter(transaction__accounting_date__lte=last)
    )
    return [
        (code, amount if amount > 0 else ZERO, -amount if amount < 0 else ZERO)
        for (code, _), amount in sorted(balances.items())
        if amount != 0
    ]


def _counted(count: int, noun: str, plural: str = "") -> str:
    """ "no invoice", "1 invoice", "13 invoices"."""
    if count == 0:
        return f"no {noun}"
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def _step_text(step: CloseStep, month: datetime) -> str:
    """What a close step did, counts saying what they count: "uptime of 13 paid tenants
    checked against their tiers; 3 tenants credited, 236,209.02 USD", "13 invoices
    issued, no credit note"."""
    detail = step.detail or {}
    if step.name == "sla":
        credits = list(SlaCredit.objects.filter(month_start=month))
        credited = [credit for credit in credits if credit.amount > 0]
        text = f"uptime of {_counted(len(credits), 'paid tenant')} checked against their tiers"
        if not credited:
            return f"{text}; none credited"
        amount = money_text(amount=_sum(c.amount for c in credited), currency=credited[0].currency)
        return f"{text}; {_counted(len(credited), 'tenant')} credited, {amount}"
    if step.name == "issue":
        notes = detail.get("credit_notes", 0)
        netted = " (months that netted below zero)" if notes else ""
        invoices = _counted(detail.get("invoices", 0), "invoice")
        return f"{invoices} issued, {_counted(notes, 'credit note')}{netted}"
    if step.name == "breakage":
        balances = detail.get("balances", 0)
        if not balances:
            return "no prepaid balance expired in the month"
        return f"{_counted(balances, 'prepaid balance')} expired: breakage booked"
    return ""


def close_report(*, month: datetime) -> CloseReport:
    """The close report of the UTC month starting at `month` (open, running or closed)."""
    close = MonthClose.objects.filter(month=month).first()
    steps = list(close.steps.all()) if close else []
    for step in steps:
        step.text = _step_text(step, month)
    first, last = month.date(), month_last_day(month)
    rated, rounded, errors = _rating(month)
    invoiced, carried = _billed(month)
    uncarried = rounded - invoiced - carried if month_is_closed(month) else ZERO
    return CloseReport(
        month=month,
        status=_status(month, close),
        close=close,
        steps=steps,
        rated=rated,
        invoiced=invoiced,
        carried=carried,
        uncarried=uncarried,
        rounding=rated - invoiced - carried - uncarried,
        rating_errors=errors,
        ledger_revenue=_ledger_revenue(first, last),
        document_revenue=_document_revenue(first, last),
        trial_balance=_trial_balance(last),
    )


def close_months(*, limit: int = 24) -> list[tuple[datetime, str]]:
    """The months with a close or invoices, newest first, with their status."""
    months = set(MonthClose.objects.values_list("month", flat=True))
    months |= set(
        Invoice.objects.filter(kind=Invoice.Kind.USAGE)
        .values_list("period_start", flat=True)
        .distinct()
    )
    closes = {c.month: c for c in MonthClose.objects.all()}
    return [
        (month, _status(month, closes.get(month))) for month in sorted(months, reverse=True)[:limit]
    ]
