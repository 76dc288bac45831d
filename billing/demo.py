"""Demo billing: list prices from demo-factory.md, a contract per tenant, promotions, and every
complete month of the data closed by the month-end close, its invoices paid over their terms
(one late, one open and overdue), and one disputed invoice credited after payment."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TextIO

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Min

from billing.domain.budget import BUDGET
from billing.domain.rating.types import LineKind
from billing.models import (
    Contract,
    CreditNote,
    Invoice,
    PrepaidBalance,
    Price,
    PromotionalCredit,
    Reservation,
)
from billing.selectors.budget import budgets_read
from billing.services.close import close_run
from billing.services.credit_notes import credit_note_issue
from billing.services.invoices.collect import invoice_pay, invoices_overdue_raise
from billing.services.prepaid import prepaid_purchase
from billing.services.pricing import contract_create, price_create, promotion_grant
from billing.services.rating import rated_usage_update
from billing.services.reservations import reservation_create
from metering.selectors.factory import deployment_list, served_model_get
from metering.selectors.usage import hourly_usage_list
from portal import clock
from portal.alerts import alerts_evaluate, rule_create
from portal.demo import DEMO_LOGINS, DEMO_TENANTS, demo_step
from portal.models import AlertRule, Tenant
from portal.money import round_money, round_money_whole
from portal.periods import month_start, months_before, next_month

PRICES_FROM = datetime(2026, 1, 1, tzinfo=UTC)
# Per million tokens: input / cached input / output (demo-factory.md, published price lists).
LIST_PRICES = {
    "llama-3.3-70b": ("0.88", "0.44", "0.88"),
    "qwen3-235b-a22b": ("0.35", "0.175", "1.40"),
    "deepseek-r1": ("0.55", "0.14", "2.19"),
}
# Classes with a price of their own besides those (demo-factory.md): DeepSeek-R1's reasoning
# at its output price. Reasoning elsewhere bills at output, cache writes at input, as their
# parents' (kpis.md section 3), so invoices show a class priced on its own and one not.
OWN_CLASS_PRICES = {"deepseek-r1": {"reasoning": "2.19"}}
B = 1_000_000_000
# Negotiated terms of the paid tenants: discount %, free tokens a month, volume tiers.
# Large accounts buy at deep discounts (the factory is weak at selling: ρ near 0.70).
PAID_TERMS = {
    "acme": (Decimal(40), 0, [{"from_tokens": 2000 * B, "discount_pct": "10"}]),
    "initech": (Decimal(35), 0, [{"from_tokens": 1000 * B, "discount_pct": "5"}]),
    "umbrella": (Decimal(35), 0, []),
    "stark": (Decimal(30), 0, []),
    "wayne": (Decimal(25), 100 * B, []),
    "hooli": (Decimal(25), 100 * B, []),
    "piedpiper": (Decimal(20), 100 * B, []),
    "soylent": (Decimal(15), 100 * B, []),
    "tyrell": (Decimal(15), 100 * B, []),
}
DEFAULT_PAID = (Decimal(0), 100 * B, [])
CONTRACTS_FROM = datetime(2026, 1, 1, tzinfo=UTC)
# Payment terms (days; the others 30) and how many days after issue each tenant pays (the
# others: 12 days before the due date). Umbrella pays eight days late; Soylent has not paid its
# oldest invoice, which is open and overdue.
PAYMENT_TERMS = {"initech": 15, "umbrella": 15, "stark": 15, "soylent": 15, "dunder": 15}
PAYS_AFTER_DAYS = {"acme": 9, "initech": 6, "umbrella": 23, "stark": 14, "hooli": 27}
NEVER_PAYS_OLDEST = "soylent"
INVOICE_RUN_HOUR = timedelta(hours=2)  # the month-end close runs at 02:00 UTC on the 1st
# Acme disputes part of its first invoice after paying it: two lines credited 5% each, on the
# 20th of the next month, settled to its credit balance, which its next invoice draws.
DISPUTING = "acme"
DISPUTE_SHARE = Decimal("0.05")
DISPUTE_DAY = timedelta(days=19, hours=10)
# Reservations (demo-factory.md): Initech reserves 64 B200 GPUs of DeepSeek-R1 for 6 months
# at 2.90 per GPU-hour (used at about 70% a day, overage at its peaks: the demo's traffic,
# metering.demo.parameters.MODEL_DEMAND); Massive Dynamic 16 H100 of Llama-3.3-70B until
# cancelled at 2.20 (used at about a third: its unused fee shows). Both from the first day
# of the demo's data.
RESERVATIONS = (
    ("initech", "deepseek-r1", 64, "2.90", "6m"),
    ("massive", "llama-3.3-70b", 16, "2.20", "none"),
)
# Vandelay prepays 500,000.00 on the first day of the data's first month, usable through the
# end of the next: the closes of both months draw it.
PREPAYING, PREPAID_AMOUNT = "vandelay", Decimal("500000.00")


@demo_step("billing: price book, contracts, promotions, the closed months' invoices and payments")
def demo_billing(*, stdout: TextIO) -> None:
    currency = settings.FACTORY_CURRENCY
    for slug, prices in LIST_PRICES.items():
        model = served_model_get(slug=slug)
        if model is None or Price.objects.filter(model=model).exists():
            continue
        classes = dict(zip(("input", "cached_input", "output"), prices, strict=True))
        for token_class, per_million in (classes | OWN_CLASS_PRICES.get(slug, {})).items():
            price_create(
                model=model,
                token_class=token_class,
                per_million=Decimal(per_million),
                currency=currency,
                effective_from=PRICES_FROM,
            )
    for _name, slug, kind in DEMO_TENANTS:
        tenant = Tenant.objects.get(slug=slug)
        if Contract.objects.filter(tenant=tenant).exists():
            continue
        discount, free, tiers = PAID_TERMS.get(slug, DEFAULT_PAID) if kind == "paid" else (0, 0, [])
        contract_create(
            tenant=tenant,
            kind=kind,
            discount_pct=Decimal(discount),
            free_tokens_per_month=free,
            volume_tiers=tiers,
            currency=currency,
            payment_terms_days=PAYMENT_TERMS.get(slug, 30),
            effective_from=CONTRACTS_FROM,
        )
    now = clock.now()
    this_month = month_start(now)
    _reservations(start=months_before(now, 2))  # the demo's data starts then
    if not PromotionalCredit.objects.exists():
        promotion_grant(
            tenant=Tenant.objects.get(slug="dunder"),
            amount=Decimal("2500.00"),
            currency=currency,
            effective_from=CONTRACTS_FROM,
            expires_at=this_month + timedelta(days=90),
            description="Startup programme credit",
        )
    _invoice_closed_months(now=now, stdout=stdout)
    overdue = invoices_overdue_raise(now=now)  # as the hourly job would have by now
    stdout.write(f"  {overdue} invoices overdue\n")
    _budget(now=now, stdout=stdout)


def _budget(*, now, stdout: TextIO) -> None:
    """Acme's budget for the month, set so that its spend so far is 86 % of it: the 50 and
    80 % thresholds fire (as the alerts job would have), its home shows the month heading
    past it; and its projects' quotas, search's soft one firing at 80 %, eval's hard one
    not reached."""
    tenant = Tenant.objects.get(slug="acme")
    if AlertRule.objects.filter(kind=BUDGET, tenant=tenant).exists():
        return
    rated_usage_update()  # the month so far, as the rate stage keeps it
    operator = User.objects.get(username=DEMO_LOGINS[0][0])
    # The tenant's budget at 86 %; two of its projects' quotas (demo-factory.md, "Projects"):
    # search's soft one at 86 % (its 80 % fires), eval's hard one at 40 % (not reached).
    for project, used, params in (
        ("", "0.86", {}),
        ("search", "0.86", {"thresholds": [80, 100]}),
        ("eval", "0.40", {"enforce": "hard"}),
    ):
        scope = {"project": project} if project else {}
        named = f"acme's {project} quota" if project else "acme's budget"
        probe = {"amount": "1.00", "thresholds": [50, 80, 100]}
        rule = AlertRule(kind=BUDGET, tenant=tenant, scope=scope, params=probe)
        [spent] = budgets_read([rule], now=now)
        if not spent.spent:
            stdout.write(f"  no {named}: its month is not rated ({spent.state})\n")
            continue
        amount = round_money_whole(amount=spent.spent / Decimal(used), currency=spent.unit)
        params = {"amount": f"{amount}.00", **params}
        rule_create(kind=BUDGET, tenant=tenant, scope=scope, params=params, by=operator)
        stdout.write(f"  {named}: {amount:,} {spent.unit}\n")
    fired = alerts_evaluate(now=now)["fired"]
    stdout.write(f"  {fired} thresholds reached\n")


def _reservations(*, start: datetime) -> None:
    """The demo's reservations (RESERVATIONS), from `start`, made before any month closes."""
    if Reservation.objects.exists():
        return
    for slug, model, gpus, rate, term in RESERVATIONS:
        reservation_create(
            tenant=Tenant.objects.get(slug=slug),
            deployment=deployment_list().get(model__slug=model),
            gpus=gpus,
            hourly_rate=Decimal(rate),
            term=term,
            starts_at=start,
        )


def _invoice_closed_months(*, now, stdout: TextIO) -> None:
    """Close every month of the data that is over, oldest first, as the month-end close
    would have at 02:00 on the 1st (or now, if that is still ahead); record each payment
    made by now, and the dispute, before the next month closes, as the books would have it."""
    data = hourly_usage_list(end=month_start(now)).aggregate(first=Min("hour"))["first"]
    if data is None:
        return
    months = []
    month = month_start(data)
    while month < month_start(now):
        months.append(month)
        month = next_month(month)
    payments = []  # (paid_at, invoice) not yet recorded, in time order
    for index, month in enumerate(months):
        if Invoice.objects.filter(period_start=month).exists():
            continue
        issued_at = min(next_month(month) + INVOICE_RUN_HOUR, now)
        for paid_at, invoice in sorted(payments, key=lambda p: p[0]):
            if paid_at <= issued_at:
                invoice_pay(invoice=invoice, paid_at=paid_at)
        payments = [(t, i) for t, i in payments if t > issued_at]
        if index == 0 and not PrepaidBalance.objects.exists():
            _prepay(month=month, stdout=stdout)
        if index == 1 and month + DISPUTE_DAY <= now:
            _dispute(month=months[0], at=month + DISPUTE_DAY, stdout=stdout)
        run = close_run(month_start=month, now=issued_at)
        for invoice in run.issued:
            slug = invoice.tenant.slug
            if invoice.status != Invoice.Status.ISSUED:
                continue
            if slug == NEVER_PAYS_OLDEST and index == 0:
                continue
            days = PAYS_AFTER_DAYS.get(slug)
            paid_at = (
                issued_at + timedelta(days=days, hours=7)
                if days is not None
                else invoice.due_at - timedelta(days=12)
            )
            if paid_at <= now:
                payments.append((paid_at, invoice))
        stdout.write(f"  {month:%Y-%m} closed: {len(run.issued)} invoices\n")
        for slug, message in run.errors.items():
            stdout.write(f"  {slug}: not billed: {message}\n")
    for paid_at, invoice in sorted(payments, key=lambda p: p[0]):
        invoice_pay(invoice=invoice, paid_at=paid_at)


def _dispute(*, month, at, stdout: TextIO) -> None:
    """The disputing tenant's invoice for `month`, paid, credited on two lines."""
    invoice = Invoice.objects.filter(
        tenant__slug=DISPUTING, period_start=month, status=Invoice.Status.PAID
    ).first()
    if invoice is None or CreditNote.objects.filter(invoice=invoice).exists():
        return
    lines = sorted(
        invoice.lines.filter(kind=LineKind.USAGE, amount__gt=0), key=lambda line: -line.amount
    )[:2]
    note = credit_note_issue(
        invoice=invoice,
        reason=CreditNote.Reason.DISPUTE,
        settle=CreditNote.Settle.BALANCE,
        lines=[
            {
                "line": line.pk,
                "amount": round_money(
                    amount=line.amount * DISPUTE_SHARE, currency=invoice.currency
                ),
            }
            for line in lines
        ],
        memo="Disputed throughput during the maintenance of the first week",
        now=at,
    )
    stdout.write(f"  {note.number}: {invoice.number} credited {note.total} (dispute)\n")


def _prepay(*, month, stdout: TextIO) -> None:
    """The prepaying tenant's purchase, on the month's first morning, paid a week later."""
    tenant = Tenant.objects.filter(slug=PREPAYING).first()
    if tenant is None:
        return
    balance = prepaid_purchase(
        tenant=tenant,
        amount=PREPAID_AMOUNT,
        expires_at=next_month(next_month(month)) - timedelta(days=1),
        now=month + timedelta(hours=9),
    )
    invoice_pay(invoice=balance.invoice, paid_at=month + timedelta(days=7, hours=11))
    stdout.write(f"  {balance.invoice.number}: {PREPAYING} prepaid {balance.amount}\n")
