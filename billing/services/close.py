"""The month-end close (architecture.md, jobs `close`; kpis.md "Closed months", "Invoices",
"Tie-out"): one service behind `manage.py close`, `POST /api/v1/close`, the monthly beat
job and the finance page. Its steps, in order, each recorded when done:

    lock    the month refuses writes from now on (portal.closing), once its rating has no
            error (a missing price can still be added while it is open)
    stages  the stages before billing's (the fold), in this process
    rate    billing's rate stage, in this process
    sla     the month's SLA closed: each paid tenant's credit posted once
    issue   per tenant, in one transaction each: its invoice drafted (a draft left by a killed
            run is drafted again if what the month bills changed), numbered and posted, or
            the credit note of a month that netted below zero
    breakage  what is left of the prepaid balances expiring in the month, booked as revenue on
            each one's expiry day (after the month's invoices drew them)
    closed  the close's own postings end: from now on nothing is dated in the month

Every step is idempotent: a run killed at any point is resumed by the next run (the beat's,
a command's, a request's), which redoes the step it was in and the ones after it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction

from billing.domain.rating.types import RatingError
from billing.models import (
    CloseStep,
    CreditNote,
    Invoice,
    MonthClose,
    PrepaidBreakage,
    SlaCredit,
)
from billing.selectors.invoices import month_lines, tenants_to_bill
from billing.selectors.rating.rated_usage import rated_month_totals
from billing.services.credit_notes import credit_note_for_month
from billing.services.credits import sla_month_close
from billing.services.invoices.draft import invoice_draft
from billing.services.invoices.issue import invoice_finalize
from billing.services.prepaid import prepaid_breakage_book
from portal import clock
from portal.closing import month_close, month_close_finish
from portal.models import Tenant
from portal.periods import month_start as month_of
from portal.periods import next_month
from portal.pipeline import MEASURE, RATE, stage_run, stages_run

STEPS = ("lock", "stages", "rate", "sla", "issue", "breakage", "closed")


class CloseError(Exception):
    """A close that cannot run (the month is not over, or its rating has errors); answered
    naming `month`."""

    http_status = 400

    def api_errors(self) -> list[dict]:
        return [{"field": "month", "message": str(self)}]


@dataclass
class CloseRun:
    """What one run of the close did."""

    month_start: datetime
    issued: list[Invoice] = field(default_factory=list)
    existing: list[Invoice] = field(default_factory=list)
    credit_notes: list[CreditNote] = field(default_factory=list)
    nothing_due: list[str] = field(default_factory=list)  # tenant slugs
    errors: dict[str, str] = field(default_factory=dict)  # tenant slug -> message
    sla_credits: list[SlaCredit] = field(default_factory=list)
    breakage: list[PrepaidBreakage] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)  # the steps this run did
    at: datetime | None = None  # the close's given time (the demo's history), else the clock

    def stamp(self) -> datetime:
        return self.at or clock.now()


def _record(close: MonthClose, name: str, *, run: CloseRun, **detail) -> None:
    CloseStep.objects.get_or_create(
        close=close, name=name, defaults={"done_at": run.stamp(), "detail": detail}
    )


def close_check(month_start: datetime, *, now: datetime | None = None) -> datetime:
    """The UTC month holding `month_start`, refused (CloseError, naming `month`) while it is
    not over: a month is closed once it ends."""
    start = month_of(month_start)
    if next_month(start) > (now or clock.now()):
        raise CloseError(f"{start:%Y-%m} is not over yet; a month is closed once it ends")
    return start


def close_run(*, month_start: datetime, by=None, now: datetime | None = None) -> CloseRun:
    """Close the UTC month holding `month_start`, or resume its close: the steps not yet done,
    in order (STEPS). A month not over yet is refused (CloseError). Returns what this run
    did; a tenant whose month cannot be rated stops it (`errors`, also kept on the close)
    before the lock, or, for usage arriving later, before the month's last step."""
    run = CloseRun(month_start=month_of(month_start), at=now)
    now = now or clock.now()
    start = close_check(month_start, now=now)
    close, _ = MonthClose.objects.get_or_create(
        month=start, defaults={"started_at": now, "started_by": by}
    )
    done = set(close.steps.values_list("name", flat=True))
    for name in STEPS:
        if name in done:
            continue
        if not _STEP[name](close=close, run=run, by=by, now=now):
            MonthClose.objects.filter(pk=close.pk).update(
                error="; ".join(f"{slug}: {message}" for slug, message in run.errors.items())
            )
            return run
        run.steps.append(name)
    MonthClose.objects.filter(pk=close.pk).update(error="")
    return run


def _rating_errors(start: datetime) -> dict[str, str]:
    tenants = tenants_to_bill(start)
    slugs = {tenant.pk: tenant.slug for tenant in tenants}
    return {
        slugs[pk]: str(totals.error)
        for pk, totals in rated_month_totals(month_start=start, tenants=tenants).items()
        if totals.error
    }


def _lock(*, close, run, by, now) -> bool:
    stages_run(before=MEASURE)  # the month rated as it stands, before anything is locked
    run.errors = _rating_errors(close.month)
    if run.errors:
        return False
    with transaction.atomic():
        month_close(month=close.month, by=by, now=now)
        _record(close, "lock", run=run)
    return True


def _stages(*, close, run, by, now) -> bool:
    stages_run(before=RATE)
    _record(close, "stages", run=run)
    return True


def _rate(*, close, run, by, now) -> bool:
    stage_run(RATE)
    _record(close, "rate", run=run)
    return True


def _sla(*, close, run, by, now) -> bool:
    run.sla_credits = sla_month_close(month_start=close.month, by=by, now=now, by_close=True)
    _record(close, "sla", run=run, credits=len(run.sla_credits))
    return True


def _issue(*, close, run, by, now) -> bool:
    for tenant in tenants_to_bill(close.month):
        try:
            _bill(tenant=tenant, month_start=close.month, run=run, by=by, now=now)
        except RatingError as error:
            run.errors[tenant.slug] = str(error)
    if run.errors:
        return False
    _record(
        close, "issue", run=run, invoices=len(run.issued) + len(run.existing),
        credit_notes=len(run.credit_notes),
    )  # fmt: skip
    return True


@transaction.atomic
def _bill(*, tenant: Tenant, month_start: datetime, run: CloseRun, by, now: datetime) -> None:
    """One tenant's month, in one transaction: its invoice issued, or the credit note of a
    month that nets below zero, or nothing due."""
    Tenant.objects.select_for_update().filter(pk=tenant.pk).first()  # one document at a time
    if CreditNote.objects.filter(tenant=tenant, period_start=month_start, invoice=None).exists():
        return
    invoice, _ = invoice_draft(tenant=tenant, month_start=month_start)
    if invoice is None:
        billed = month_lines(tenant=tenant, month_start=month_start)
        if billed.is_empty or billed.total >= 0:
            run.nothing_due.append(tenant.slug)
            return
        run.credit_notes.append(
            credit_note_for_month(
                tenant=tenant, month_start=month_start, billed=billed, by=by, now=now
            )
        )
        return
    if invoice.status != Invoice.Status.DRAFT:
        run.existing.append(invoice)
        return
    run.issued.append(invoice_finalize(invoice=invoice, by=by, now=now, by_close=True))


def _breakage(*, close, run, by, now) -> bool:
    run.breakage = prepaid_breakage_book(month_start=close.month, by=by)
    _record(close, "breakage", run=run, balances=len(run.breakage))
    return True


def _closed(*, close, run, by, now) -> bool:
    with transaction.atomic():
        month_close_finish(month=close.month)
        MonthClose.objects.filter(pk=close.pk).update(finished_at=run.stamp())
        _record(close, "closed", run=run)
    return True


_STEP = {
    "lock": _lock,
    "stages": _stages,
    "rate": _rate,
    "sla": _sla,
    "issue": _issue,
    "breakage": _breakage,
    "closed": _closed,
}
