"""The month-end close (billing.services.close): its steps, resumed after a kill at each of
them with usage arriving meanwhile; the close report; what a closed month refuses."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.core.management import call_command

from billing.models import CloseStep, CreditNote, Invoice, InvoiceLine, MonthClose
from billing.selectors.close import close_report
from billing.services import close as close_service
from billing.services.close import STEPS, close_run
from portal.closing import month_close
from portal.models import ClosedMonth
from tests.billing.factories import APRIL, MARCH, M, make_contract, make_priced_model, post_usage

pytestmark = pytest.mark.both_backends

MAY = datetime(2026, 5, 1, tzinfo=UTC)


class Killed(BaseException):
    """The worker dies: nothing after this point of the step runs."""


@pytest.fixture
def march(admin_api, tenant_a, tenant_b):
    """Two paid tenants with March usage: tenant-a 10 M in + 10 M out (17.60 at list, 10%
    off: 15.84), tenant-b 5 M in + 5 M out (8.80, no discount)."""
    make_priced_model()
    make_contract(tenant_a, discount_pct=Decimal(10))
    make_contract(tenant_b)
    usage = {"time": "2026-03-03T00:00:00Z", "input_tokens": 10 * M, "output_tokens": 10 * M}
    post_usage(admin_api, [{"id": "a1", **usage}])
    half = {"time": "2026-03-04T00:00:00Z", "input_tokens": 5 * M, "output_tokens": 5 * M}
    post_usage(admin_api, [{"id": "b1", **half}], tenant="tenant-b")


def _late(admin_api, event_id: str) -> None:
    """1 M in + 1 M out for tenant-a on 20 March (1.76 at list, 1.584 after 10%)."""
    late = {"time": "2026-03-20T00:00:00Z", "input_tokens": M, "output_tokens": M}
    post_usage(admin_api, [{"id": event_id, **late}])


def test_a_close_runs_its_steps_in_order_and_records_them(march):
    run = close_run(month_start=MARCH)

    assert (
        run.steps == list(STEPS) == ["lock", "stages", "rate", "sla", "issue", "breakage", "closed"]
    )
    assert [i.number for i in run.issued] == ["INV-2026-000001", "INV-2026-000002"]
    assert {i.tenant.slug: i.total for i in run.issued} == {
        "tenant-a": Decimal("15.84"),
        "tenant-b": Decimal("8.80"),
    }
    close = MonthClose.objects.get(month=MARCH)
    assert close.finished_at is not None and close.error == ""
    assert list(close.steps.values_list("name", flat=True)) == list(STEPS)
    assert ClosedMonth.objects.get(month=MARCH).closing is False
    report = close_report(month=MARCH)
    assert report.status == "closed"
    assert (report.invoiced, report.carried, report.uncarried) == (
        Decimal("24.64"),
        Decimal("0"),
        Decimal("0"),
    )
    assert report.rated == Decimal("24.64") and report.rounding == 0
    assert (
        report.ledger_revenue
        == report.document_revenue
        == {
            "contra:discounts": Decimal("-1.76"),
            "revenue:llama-70b": Decimal("26.40"),
        }
    )
    assert report.is_balanced


@pytest.mark.parametrize("killed_at", [*STEPS, "issue:second-tenant"])
def test_a_close_killed_at_any_step_resumes_to_one_set_of_documents(
    admin_api, march, monkeypatch, killed_at
):
    """Late usage arrives during the close; the worker dies at one step (after its work,
    before its record; or between the two tenants' invoices); the next run resumes. One
    invoice per tenant, gapless numbers, the report balanced, late usage invoiced or carried."""
    record = close_service._record
    finalize = close_service.invoice_finalize
    name = killed_at.partition(":")[0]
    step = close_service._STEP[name]
    killed = []

    def arriving(**kwargs):  # late usage, from another process, just before the step
        _late(admin_api, "late-during-close")
        return step(**kwargs)

    def dying_record(close, name, **kwargs):
        if name == killed_at and not killed:
            killed.append(name)
            raise Killed(name)
        return record(close, name, **kwargs)

    def dying_finalize(*, invoice, **kwargs):
        if Invoice.objects.exclude(number=None).exists() and not killed:
            killed.append("issue")
            raise Killed("issue")
        return finalize(invoice=invoice, **kwargs)

    monkeypatch.setitem(close_service._STEP, name, arriving)
    if killed_at == "issue:second-tenant":
        monkeypatch.setattr(close_service, "invoice_finalize", dying_finalize)
    else:
        monkeypatch.setattr(close_service, "_record", dying_record)
    with pytest.raises(Killed):
        close_run(month_start=MARCH)
    assert killed
    monkeypatch.undo()

    close_run(month_start=MARCH)
    close_run(month_start=MARCH)  # a third run finds nothing to do

    march_invoices = Invoice.objects.filter(period_start=MARCH).exclude(status="void")
    assert sorted(march_invoices.values_list("tenant__slug", flat=True)) == [
        "tenant-a",
        "tenant-b",
    ]
    assert sorted(Invoice.objects.exclude(number=None).values_list("number", flat=True)) == [
        "INV-2026-000001",
        "INV-2026-000002",
    ]
    assert not CreditNote.objects.exists()
    assert list(CloseStep.objects.values_list("name", flat=True)) == list(STEPS)
    report = close_report(month=MARCH)
    assert report.status == "closed" and report.is_balanced
    # The late 1.584 is on March's invoice (when it arrived before the issue step) or waits
    # for April's: rated = invoiced + carried + not yet carried, to the cent.
    assert report.rated == Decimal("26.224")
    assert report.invoiced + report.uncarried == Decimal("26.22")
    assert report.carried == 0 and report.rounding == Decimal("0.004")
    if report.uncarried:
        close_run(month_start=APRIL)
        april = close_report(month=MARCH)
        assert (april.carried, april.uncarried) == (Decimal("1.58"), Decimal("0"))
        adjustment = InvoiceLine.objects.get(kind="adjustment")
        assert (adjustment.for_month, adjustment.amount) == (MARCH, Decimal("1.58"))
        assert close_report(month=APRIL).is_balanced


def test_a_month_that_cannot_be_rated_is_not_locked(admin_api, tenant_a):
    make_contract(tenant_a)
    make_priced_model(prices=("0.88", "0.44", "0.88"))
    from billing.models import Price

    Price.objects.filter(token_class="output").delete()
    post_usage(admin_api, [{"id": "a1", "time": "2026-03-03T00:00:00Z", "input_tokens": M,
                            "output_tokens": M}])  # fmt: skip

    run = close_run(month_start=MARCH)

    assert list(run.errors) == ["tenant-a"] and run.steps == []
    assert not ClosedMonth.objects.exists()
    assert MonthClose.objects.get(month=MARCH).error == (
        "tenant-a: no output list price in force for model 'llama-70b' at 2026-03-03T00:00:00+00:00"
    )
    assert close_report(month=MARCH).status == "open"


def test_a_month_not_over_is_refused(now):
    from billing.services.close import CloseError

    with pytest.raises(CloseError, match="is not over yet"):
        close_run(month_start=now)


def test_the_close_command_and_its_invoice_alias(march, capsys):
    call_command("close", "--month", "2026-03")
    out = capsys.readouterr().out
    assert "steps done now: lock, stages, rate, sla, issue, breakage, closed" in out
    assert "INV-2026-000001  tenant-a" in out
    call_command("invoice", "--month", "2026-03")
    assert "none left: already closed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("month", "message"),
    [
        ("1999-01", "--month must be within the years 2000–2100, got '1999-01'"),
        ("2026-1", "--month must be a month, YYYY-MM, got '2026-1'"),
        ("2026-13", "--month the month must be 01 to 12, got '2026-13'"),
    ],
)
def test_the_close_command_takes_a_month_as_the_api_does(month, message, db):
    """The command and the close job parse months with the API's rule
    (portal.periods.month_parse): what the API refuses, they refuse, closing nothing."""
    from django.core.management.base import CommandError

    from billing.tasks import close_task
    from portal.errors import FieldError

    with pytest.raises(CommandError) as refused:
        call_command("close", "--month", month)
    assert str(refused.value) == message
    with pytest.raises(FieldError):
        close_task(month=month)
    assert not MonthClose.objects.exists()


def test_the_close_job_and_command_close_last_month_by_default(march, now, capsys):
    """Last month is one rule (portal.periods.last_month): the period preset's, the job's
    and the command's."""
    from billing.tasks import close_task
    from portal import clock
    from portal.periods import last_month, period_resolve

    assert last_month(clock.now()) == period_resolve({"period": "last_month"}).start
    call_command("close")
    assert f"{last_month(clock.now()):%Y-%m}: steps done now: lock" in capsys.readouterr().out
    close_task()  # a second close of the same month: nothing left to do
    assert MonthClose.objects.get().month == last_month(clock.now())


def test_close_api_queues_and_reports(march, users, token_client):
    from rest_framework.test import APIClient

    finance = APIClient()
    finance.force_login(users["finance"])
    queued = finance.post("/api/v1/close", {"month": "2026-03"}, format="json")
    assert queued.status_code == 202, queued.json()
    assert queued.json() == {"month": "2026-03", "url": "/api/v1/close/2026-03"}
    report = finance.get("/api/v1/close/2026-03").json()  # the eager job closed it
    assert report["status"] == "closed"
    assert [step["name"] for step in report["steps"]] == list(STEPS)
    assert (report["rated"], report["invoiced"], report["carried"], report["rounding"]) == (
        "24.64", "24.64", "0.00", "0",
    )  # fmt: skip
    assert report["ledger_revenue"] == report["document_revenue"]
    assert report["revenue_difference"] == {} and report["is_balanced"] is True
    debits = sum(Decimal(row["debit"]) for row in report["trial_balance"])
    credits = sum(Decimal(row["credit"]) for row in report["trial_balance"])
    assert debits == credits == Decimal("26.40")
    bad = finance.post("/api/v1/close", {"month": "2026-13"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "month"
    investor = APIClient()
    investor.force_login(users["investor"])
    assert investor.get("/api/v1/close/2026-03").status_code == 403
    member = APIClient()
    member.force_login(users["tenant"])
    assert member.post("/api/v1/close", {"month": "2026-03"}, format="json").status_code == 403


def test_a_closed_month_refuses_postings_and_dates_a_late_payment_in_the_next_open_month(march):
    from billing.services.invoices.collect import invoice_pay
    from billing.services.ledger import Leg, account_named, ledger_post
    from portal.errors import FieldError

    [invoice, _] = close_run(month_start=MARCH).issued
    with pytest.raises(FieldError) as refused:
        ledger_post(
            kind="manual",
            memo="a correction dated in March",
            legs=[
                Leg(account_named("revenue:minimum"), Decimal(-1)),
                Leg(account_named("contra:discounts"), Decimal(1)),
            ],
            currency="USD",
            accounting_date=datetime(2026, 3, 31, tzinfo=UTC).date(),
        )
    assert refused.value.field == "accounting_date"
    paid = invoice_pay(invoice=invoice, paid_at=datetime(2026, 3, 31, 12, tzinfo=UTC))
    payment = paid.tenant.ledgertransaction_set.get(kind="payment")
    assert payment.accounting_date.isoformat() == "2026-04-01"  # its own date kept beside it
    assert payment.occurred_at == datetime(2026, 3, 31, 12, tzinfo=UTC)


def test_close_pages_and_documents(march, users, client):
    close_run(month_start=MARCH)
    client.force_login(users["finance"])
    for url in (
        "/billing/close/",
        "/billing/close/2026-03/",
        "/billing/receivables/",
        "/billing/credit-notes/",
    ):
        assert client.get(url).status_code == 200, url  # fmt: skip
    page = client.get("/billing/close/2026-03/").content.decode()
    assert "They agree to the cent." in page and "26,400.00" not in page
    pdf = client.get("/billing/close/2026-03/pdf/")
    assert pdf["Content-Type"] == "application/pdf" and pdf.content.startswith(b"%PDF")
    csv = client.get("/billing/receivables/?as_of=2026-12-16&format=csv").content.decode()
    assert csv.splitlines()[1:] == [
        "tenant-a,15.84,0.00,0.00,0.00,0.00,15.84,USD",
        "tenant-b,8.80,0.00,0.00,0.00,0.00,8.80,USD",
    ]
    client.force_login(users["tenant"])
    assert client.get("/billing/close/").status_code == 403
    assert client.get("/billing/close/2026-03/pdf/").status_code == 403


def test_the_close_page_refuses_a_month_as_the_api_does_beside_the_field(march, users, client):
    """Today is 2026-12-16: December is not over, and 2026-13 is no month. The page answers
    400 with the API's message beside the month field, keeping what was typed; nothing is
    queued (no close exists). March, which is over, is queued and opens its report."""
    from rest_framework.test import APIClient

    from billing.models import MonthClose

    api = APIClient()
    api.force_login(users["finance"])
    client.force_login(users["finance"])
    for month in ("2026-12", "2026-13"):
        page = client.post("/billing/close/", {"month": month})
        message = api.post("/api/v1/close", {"month": month}, format="json").json()["errors"][0]
        assert page.status_code == 400 and message["field"] == "month"
        body = page.content.decode()
        assert (
            f'<p class="error" id="month-error" role="alert">month: {message["message"]}</p>'
            in body
        )
        assert f'name="month" type="month" value="{month}"' in body
    assert not MonthClose.objects.exists()
    queued = client.post("/billing/close/", {"month": "2026-03"})
    assert queued.status_code == 302 and queued["Location"] == "/billing/close/2026-03/?queued=1"


def test_the_close_page_of_a_closed_month_says_when_it_closed_never_queued(march, users, client):
    """No dead end: asking to close March once it is closed queues nothing; the page says
    when it closed and opens its report, whose steps say what they counted."""
    close_run(month_start=MARCH, now=datetime(2026, 4, 1, 2, tzinfo=UTC))
    steps = list(CloseStep.objects.values_list("name", "done_at"))
    client.force_login(users["finance"])

    answer = client.post("/billing/close/", {"month": "2026-03"}, follow=True)

    assert answer.redirect_chain == [("/billing/close/2026-03/", 302)]
    page = answer.content.decode()
    assert "March 2026 is closed on 1 Apr 2026 at 02:00 UTC: here is its report." in page
    assert "<strong>Closed</strong> on 1 Apr 2026 at 02:00 UTC" in page
    assert "queued" not in page and 'hx-trigger="every 2s"' not in page
    assert list(CloseStep.objects.values_list("name", "done_at")) == steps  # nothing ran
    for said in (
        "uptime of 2 paid tenants checked against their tiers; none credited",
        "2 invoices issued, no credit note",
        "no prepaid balance expired in the month",
    ):
        assert said in page, said


def test_the_close_page_follows_a_close_until_it_ends(march, users, client):
    """ui.md, Long work: while a month's close runs, or once queued from the page, its report
    reloads itself (htmx, every two seconds); a closed month, or a close stopped by an
    error, is read once."""
    close_run(month_start=MARCH)
    client.force_login(users["finance"])
    polls = 'hx-trigger="every 2s"'

    def page(path: str) -> str:
        return client.get(path).content.decode()

    assert polls not in page("/billing/close/2026-03/")
    assert polls not in page("/billing/close/2026-03/?queued=1")  # resumed, already closed
    MonthClose.objects.filter(month=MARCH).update(finished_at=None)  # its last step to come
    running = page("/billing/close/2026-03/")
    assert polls in running and 'hx-get="/billing/close/2026-03/"' in running
    assert "this page follows its steps until it ends" in running
    assert polls in page("/billing/close/2026-04/?queued=1")  # queued, not started
    assert polls not in page("/billing/close/2026-04/")
    MonthClose.objects.filter(month=MARCH).update(error="tenant-a: no price for llama-70b")
    assert polls not in page("/billing/close/2026-03/")  # stopped: its error is shown


def test_a_closed_month_is_not_rewritten_from_before_it(admin_api, march):
    """Versions dated before the end of the last closed month would govern it: refused naming
    effective_from, the month's invoices and rating unchanged; an incident or a window
    spanning it refused naming its start; a new deployment starts after it."""
    from billing.models import Price
    from metering.models import DeploymentVersion

    close_run(month_start=MARCH)
    before = (
        list(Invoice.objects.values_list("number", "total")),
        close_report(month=MARCH).rated,
        Price.objects.count(),
    )
    feb = "2026-02-01T00:00:00Z"
    writes = {
        "/api/v1/prices": {"model": "llama-70b", "token_class": "output", "per_million": "9",
                           "currency": "USD", "effective_from": feb},
        "/api/v1/contracts": {"tenant": "tenant-a", "kind": "paid", "discount_pct": "90",
                              "effective_from": feb},
        "/api/v1/factory-costs": {"staff_per_month": "1", "sga_per_month": "0",
                                  "effective_from": feb},
    }  # fmt: skip
    for path, body in writes.items():
        response = admin_api.post(path, body, format="json")
        assert response.status_code == 400, (path, response.json())
        [error] = response.json()["errors"]
        assert error["field"] == "effective_from"
        assert error["message"].startswith("is before the end of the last closed month (2026-03)")
    spanning = {
        "/api/v1/incidents": ({"title": "Long outage", "severity": "sev1",
                               "impact": "major_outage", "started_at": "2026-02-20T00:00:00Z"},
                              "started_at"),
        "/api/v1/maintenance": ({"title": "Long window", "starts_at": "2026-02-27T00:00:00Z",
                                 "ends_at": "2026-04-02T00:00:00Z",
                                 "announced_at": "2026-02-01T00:00:00Z"}, "starts_at"),
    }  # fmt: skip
    for path, (body, field) in spanning.items():
        response = admin_api.post(path, body, format="json")
        assert response.status_code == 400, (path, response.json())
        assert [e["field"] for e in response.json()["errors"]] == [field]
    after = (
        list(Invoice.objects.values_list("number", "total")),
        close_report(month=MARCH).rated,
        Price.objects.count(),
    )
    assert after == before
    admin_api.post("/api/v1/models", {"slug": "qwen-8b", "name": "Qwen 8B"}, format="json")
    created = admin_api.post(
        "/api/v1/deployments",
        {"slug": "qwen-8b@h100-a", "model": "qwen-8b", "pool": "h100-a", "r_ref": "1000",
         "w_in": "0", "slo_ttft_ms": 2000, "slo_tpot_ms": 50},
        format="json",
    )  # fmt: skip
    assert created.status_code == 201, created.json()
    first = DeploymentVersion.objects.get(deployment__slug="qwen-8b@h100-a")
    assert first.effective_from == APRIL


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ("true", "", "Invalid data. Expected a dictionary, but got bool."),
        ('"2026-03"', "", "Invalid data. Expected a dictionary, but got str."),
        ("[]", "", "Invalid data. Expected a dictionary, but got list."),
        ("{}", "month", "This field is required."),
        ('{"month": 202603}', "month", "must be a month, YYYY-MM"),
        ('{"month": null}', "month", "This field may not be null."),
    ],
)
def test_the_close_api_names_what_is_wrong_with_a_body_that_is_not_a_month(
    db, users, body, field, message
):
    """Found by `make soak`'s fuzzing: a JSON body that is not an object was a 500."""
    from rest_framework.test import APIClient

    finance = APIClient()
    finance.force_login(users["finance"])
    answer = finance.generic("POST", "/api/v1/close", body, content_type="application/json")
    assert answer.status_code == 400, answer.content
    assert answer.json()["errors"] == [{"field": field, "message": message}]


def test_a_month_whose_close_stopped_after_its_lock_is_billed_by_its_close_not_by_the_next(
    admin_api, march
):
    """March's close locked the month, then its worker died; April closes before March's
    close resumes. March's usage is March's close to bill: April's invoice must not carry
    it as late usage, or it is billed twice."""
    month_close(month=MARCH)
    april = {"time": "2026-04-02T00:00:00Z", "input_tokens": 1 * M, "output_tokens": 1 * M}
    post_usage(admin_api, [{"id": "a2", **april}])

    [april_invoice] = close_run(month_start=APRIL).issued
    march_invoices = close_run(month_start=MARCH).issued

    # 1 M in + 1 M out at 0.88, 10% off: 1.584, billed 1.58; no adjustment line.
    assert [(line.kind, line.for_month) for line in april_invoice.lines.all()] == [
        ("usage", APRIL),
        ("usage", APRIL),
    ]
    assert april_invoice.total == Decimal("1.58")
    assert sorted(invoice.total for invoice in march_invoices) == [
        Decimal("8.80"),
        Decimal("15.84"),
    ]
