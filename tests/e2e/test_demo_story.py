"""The demo reads like a real factory (demo-factory.md): requests sized by real traces, latency
that depends on the model and the hour, two closed months paid over their terms (one late,
one open and overdue), and one lever applied two weeks ago, measured against its projection."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum

from billing.models import Invoice
from flywheel.models import LeverApplication
from metering.domain.usage.rollup import LATENCY_BUCKETS_MS
from metering.models import HourlyUsage, UsageEvent
from portal import clock
from portal.models import ClosedMonth
from portal.periods import month_start, months_before

pytestmark = pytest.mark.e2e


def _median_ms(histogram: list[int]) -> float:
    """The median of a latency histogram, interpolated inside the bucket that holds it."""
    half, seen, lower = sum(histogram) / 2, 0, 0
    for upper, count in zip(LATENCY_BUCKETS_MS, histogram, strict=False):
        if count and seen + count >= half:
            return lower + (upper - lower) * (half - seen) / count
        seen, lower = seen + count, upper
    raise AssertionError("median beyond the last bucket edge")


def test_the_demo_requests_are_sized_and_timed_like_real_traffic(demo):
    # The last day's events each stand for many requests; per request they are trace-sized.
    per_request = sorted(
        output / requests
        for output, requests in UsageEvent.objects.values_list("output_tokens", "requests")
    )
    assert per_request, "the demo's last day is at request level"
    assert 100 <= per_request[len(per_request) // 2] <= 1_000
    totals = HourlyUsage.objects.aggregate(
        i=Sum("input_tokens"), o=Sum("output_tokens"), r=Sum("requests")
    )
    assert 2.5 <= totals["i"] / totals["o"] <= 3.5
    assert 100 <= totals["o"] / totals["r"] <= 1_000  # the rollup days count the same requests

    # Median latency by model, and by hour of day within a model: busy hours are slower.
    by_model_hour: dict[tuple[str, int], list[int]] = {}
    rows = HourlyUsage.objects.values_list("deployment__model__slug", "hour", "latency_histogram")
    for model, hour, histogram in rows:
        merged = by_model_hour.setdefault((model, hour.hour), [0] * (len(LATENCY_BUCKETS_MS) + 1))
        for index, count in enumerate(histogram):
            merged[index] += count
    medians = {key: _median_ms(histogram) for key, histogram in by_model_hour.items()}
    models = {model for model, _ in medians}
    assert len(models) == 3
    assert len({round(medians[(model, 16)], -2) for model in models}) == 3  # models differ
    for model in models:
        quiet, busy = medians[(model, 4)], medians[(model, 16)]
        assert busy > 1.1 * quiet, f"{model}: {quiet:.0f} ms at 04:00, {busy:.0f} ms at 16:00"


def test_the_demo_closes_two_months_paid_over_their_terms(demo):
    now = clock.now()
    months = [months_before(month_start(now), 2), months_before(month_start(now), 1)]
    assert list(ClosedMonth.objects.values_list("month", flat=True)) == months
    oldest = Invoice.objects.filter(period_start=months[0], kind="usage").exclude(total=0)
    assert oldest.count() >= 10
    late = [i for i in oldest if i.paid_at is not None and i.paid_at > i.due_at]
    overdue = [i for i in oldest if i.is_overdue(now=now)]
    on_time = [i for i in oldest if i.paid_at is not None and i.paid_at <= i.due_at]
    assert [i.tenant.slug for i in late] == ["umbrella"]
    assert [i.tenant.slug for i in overdue] == ["soylent"]
    assert len(on_time) == oldest.count() - 2
    # Terms of 15 and 30 days, the due date counted from the issue at the month-end close.
    terms = {(i.due_at - i.issued_at).days for i in oldest}
    assert terms == {15, 30}
    assert {i.issued_at for i in oldest} == {months[1] + timedelta(hours=2)}


def test_the_demo_months_are_closed_by_the_close_with_a_disputed_invoice_credited(demo):
    """Each closed month went through every step of the close and its report balances; Acme
    disputed part of its first, paid invoice: a credit note on two of its lines, settled to
    its balance, which its next invoice drew; the aged table holds the open invoices, Soylent's
    overdue, and Umbrella's paid-late one was past due before it was paid."""
    from django.contrib.auth import get_user_model

    from billing.models import CreditNote, MonthClose, RatedTenantMonth
    from billing.selectors.close import close_report
    from billing.selectors.receivables import aged_receivables
    from billing.services.close import STEPS

    now = clock.now()
    months = [months_before(month_start(now), 2), months_before(month_start(now), 1)]
    for close in MonthClose.objects.order_by("month"):
        assert [s.name for s in close.steps.order_by("done_at", "id")] == list(STEPS)
    assert list(MonthClose.objects.order_by("month").values_list("month", flat=True)) == months
    for month in months:
        report = close_report(month=month)
        assert report.status == "closed" and report.is_balanced, month
        # Line rounding only: half a cent at most per rated line of the month.
        lines = sum(len(row.lines) for row in RatedTenantMonth.objects.filter(month_start=month))
        assert abs(report.rounding) <= Decimal("0.005") * lines, (month, report.rounding, lines)
    [note] = CreditNote.objects.all()
    assert (note.tenant.slug, note.reason, note.settle) == ("acme", "dispute", "balance")
    assert note.invoice.status == "paid" and note.invoice.period_start == months[0]
    assert note.lines.count() == 2 and note.reduced == 0 and note.settled == note.total
    drawn = Invoice.objects.get(tenant__slug="acme", period_start=months[1]).lines.get(
        kind="credit"
    )
    assert drawn.amount == -note.total
    finance = get_user_model().objects.get(username="finance")
    today = {row.tenant.slug: row for row in aged_receivables(user=finance, as_of=now.date())}
    assert today["soylent"].total > 0
    assert any(bucket != "current" for _, _, bucket in today["soylent"].invoices)
    umbrella = Invoice.objects.get(tenant__slug="umbrella", period_start=months[0])
    before_paid = aged_receivables(user=finance, as_of=umbrella.paid_at.date() - timedelta(days=1))
    [row] = [row for row in before_paid if row.tenant.slug == "umbrella"]
    assert [(i.number, bucket) for i, _, bucket in row.invoices] == [(umbrella.number, "days_1_30")]


def test_the_lever_applied_two_weeks_ago_is_measured_against_its_projection(demo, page):
    from tests.e2e.conftest import login, screenshot

    application = LeverApplication.objects.get()
    assert application.evaluated_by is not None, "the demo's cycle measured it"
    efficiency = application.realized["efficiency"]
    assert Decimal(efficiency["projected_multiplier"]) == Decimal("1.05")
    assert Decimal("1.02") < Decimal(efficiency["realized_multiplier"]) < Decimal("1.05")

    login(page, "operator", "operator-demo")
    page.goto("/flywheel/")
    table = page.get_by_role("table", name="Projected against realized")
    table.wait_for()
    assert "Speculative decoding" in table.inner_text()
    screenshot(page, "flywheel-cycles-demo")


def test_the_focus_export_of_the_last_closed_month_ties_to_its_documents(demo):
    """BilledCost of the demo's last closed month sums to the invoices that bill it, the
    purchases and credit notes issued in it, to the cent, per tenant and in all."""
    from django.contrib.auth import get_user_model

    from billing.models import CreditNote
    from billing.selectors.focus import focus_rows
    from portal.periods import next_month

    month = months_before(month_start(clock.now()), 1)
    finance = get_user_model().objects.get(username="finance")
    rows = list(focus_rows(user=finance, month=month))
    billed: dict[str, Decimal] = {}
    for row in rows:
        billed[row["BillingAccountId"]] = billed.get(row["BillingAccountId"], 0) + row["BilledCost"]
    documents: dict[str, Decimal] = {}
    live = Invoice.objects.filter(status__in=("issued", "paid"))
    issued_in = {"issued_at__gte": month, "issued_at__lt": next_month(month)}
    for invoice in [*live.filter(kind="usage", period_start=month),
                    *live.filter(kind="purchase", **issued_in)]:  # fmt: skip
        documents[invoice.tenant.slug] = documents.get(invoice.tenant.slug, 0) + invoice.total
    for note in CreditNote.objects.filter(**issued_in):
        documents[note.tenant.slug] = documents.get(note.tenant.slug, 0) - note.total
    assert billed == documents
    assert sum(billed.values()) == sum(documents.values()) > 0


def test_initechs_reservation_is_used_at_60_to_90_percent_a_day_with_overage_at_its_peaks(demo):
    """demo-factory.md, "Reservations": every day of the closed months uses 60-90 % of
    Initech's 64 B200s, and its busiest hours fill them and buy the rest on demand."""
    from billing.domain.reservations import by_day
    from billing.models import Reservation
    from billing.selectors.reservations import reservation_overage, reservation_utilization

    reservation = Reservation.objects.get(tenant__slug="initech")
    end = month_start(clock.now())
    start = months_before(end, 2)
    hours = reservation_utilization(reservation, start=start, end=end)
    days = [day.utilization for day in by_day(hours)]
    assert len(days) == (end - start).days
    assert Decimal("0.60") <= min(days) and max(days) <= Decimal("0.90"), (min(days), max(days))
    full = [hour.start for hour in hours if hour.covered == hour.cap]
    overage = reservation_overage(reservation, start=start, end=end)
    assert full and all(overage.get(hour, 0) > 0 for hour in full)


def test_the_enterprise_tenants_meter_projects_with_two_of_acmes_quotas(demo):
    """demo-factory.md, "Projects": acme, initech and umbrella meter 3–5 projects each and a
    few hours without one; acme's search quota (soft) has fired at 80 %, eval's hard one is
    not reached, so no project is blocked."""
    from billing.selectors.budget import budget_answer
    from portal.models import AlertRule, Project, Tenant

    by_tenant = {}
    for slug, project_id in HourlyUsage.objects.values_list(
        "tenant__slug", "project_id"
    ).distinct():
        by_tenant.setdefault(slug, set()).add(project_id)
    for slug, count in (("acme", 4), ("initech", 3), ("umbrella", 5)):
        projects = set(Project.objects.filter(tenant__slug=slug).values_list("pk", flat=True))
        assert by_tenant[slug] == projects | {0}, slug  # every project metered, and none
        events = UsageEvent.objects.filter(tenant__slug=slug).exclude(project_id=0)
        assert len(projects) == count and events.exists(), slug
    assert by_tenant["hooli"] == {0}
    acme = Tenant.objects.get(slug="acme")
    search = budget_answer(tenant=acme, project="search")["project"]
    assert [(b["enforce"], b["state"], b["reached"]) for b in search["budgets"]] == [
        ("soft", "warning", [80])
    ]
    evaluation = budget_answer(tenant=acme, project="eval")
    assert [(b["enforce"], b["state"]) for b in evaluation["project"]["budgets"]] == [
        ("hard", "ok")
    ]
    assert evaluation["blocked"] is False
    fired = AlertRule.objects.get(tenant=acme, scope__project="search").alerts.count()
    assert fired == 1  # the 80 % threshold, once


def test_every_exhausted_free_allowance_reads_exactly_its_allowance(demo):
    """kpis.md 3, "Boundaries split events": a month whose usage ran past its free allowance
    used all of it, to the token (the crossing event is split, never billed whole), and its
    invoice says so."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from billing.models import RatedUsage
    from billing.selectors.month_to_date import allowance_used
    from billing.selectors.pricing import contract_in_force

    exhausted = []
    for invoice in Invoice.objects.filter(kind="usage").exclude(status="draft"):
        terms = contract_in_force(tenant=invoice.tenant, when=invoice.period_start)
        month = {"tenant": invoice.tenant, "month_start": invoice.period_start}
        if not (terms and terms.free_tokens_per_month):
            continue
        if RatedUsage.objects.filter(**month).exclude(sale=RatedUsage.Sale.ALLOWANCE).exists():
            exhausted.append((invoice, terms.free_tokens_per_month))
    assert len(exhausted) >= 6  # the demo's allowances run out in every closed month
    for invoice, allowance in exhausted:
        used = allowance_used(tenant=invoice.tenant, month=invoice.period_start)
        assert used == allowance, (invoice.number, used, allowance)
    client = Client()
    client.force_login(get_user_model().objects.get(username="finance"))
    invoice, allowance = exhausted[0]
    page = client.get(f"/billing/invoices/{invoice.pk}/").content.decode()
    assert f"Free allowance: {allowance:,} of {allowance:,} tokens used this month" in page
