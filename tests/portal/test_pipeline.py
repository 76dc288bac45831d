"""The pipeline (architecture.md "The pipeline: one owner per read model"): requests ask for
stages and never run one; each stage reads what changed past its own cursor; late usage for
a closed month kept only as rollups moves its figures by exactly that event, never its
invoices or ledger, and is billed as an adjustment on the next invoice."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.models import Invoice, LedgerTransaction, Posting, RatedUsage
from billing.services.close import close_run
from flywheel.models import KpiSnapshot
from metering.models import FoldPending, HourlyUsage, IncompleteRawMonth, Pool
from metering.services.usage.changes import raw_months_incomplete_mark
from metering.services.usage.rollup import rollup_days
from portal.models import StageRequest
from portal.pipeline import FOLD, stage_schedule, stages_run
from tests.billing.factories import M, make_contract, make_priced_model
from tests.conftest import broker_mode
from tests.metering.factories import make_hourly_usage

OCTOBER = datetime(2026, 10, 1, tzinfo=UTC)
NOVEMBER = datetime(2026, 11, 1, tzinfo=UTC)
LATE_HOUR = datetime(2026, 10, 15, 13, tzinfo=UTC)


@pytest.fixture
def api(users, token_client):
    return token_client(users["operator"], scopes=["ingest", "read", "admin"])


def _writes(captured, table: str) -> list[str]:
    verbs = ("INSERT", "UPDATE", "DELETE")
    return [
        q["sql"]
        for q in captured.captured_queries
        if table in q["sql"] and q["sql"].lstrip().upper().startswith(verbs)
    ]


def test_the_ingest_request_writes_no_figure_and_asks_for_the_fold_once(
    transactional_db, api, tenant_a
):
    """As in production (a broker, here an in-memory one that nothing consumes): the
    request stores the events and queues them for the fold, commits, then asks for the fold
    once; it writes no rollup, rated usage or KPI snapshot row. A second batch while that
    run is pending sends nothing more (debounced)."""
    make_priced_model()
    event = {"tenant": "tenant-a", "model": "llama-70b", "time": "2026-12-16T09:10:00Z",
             "input_tokens": 10, "output_tokens": 5}  # fmt: skip
    with broker_mode("memory://") as app:
        sent = []
        app.conf.task_publish_retry = False
        with CaptureQueriesContext(connection) as captured:
            response = api.post("/api/v1/usage/events", [{**event, "id": "q1"}])
        assert response.status_code == 200, response.json()
        sent.append(StageRequest.objects.get(name=FOLD).pending)
        again = api.post("/api/v1/usage/events", [{**event, "id": "q2"}])
        assert again.status_code == 200

    for table in ("metering_hourlyusage", "metering_dailyusage", "billing_ratedusage",
                  "flywheel_kpisnapshot", "metering_usagechange"):  # fmt: skip
        assert _writes(captured, table) == [], table
    assert sent == [True]
    assert FoldPending.objects.count() == 2  # queued for the fold by the requests
    assert not HourlyUsage.objects.exists()


def test_a_stage_asked_for_while_pending_is_sent_once(transactional_db):
    """Debounced: at most one run of a stage is pending; once it begins, a new change asks
    again (so a change during a run is never left for the beat alone). An ask while a run
    is pending, the common case under a stream of writes, is one read."""
    from portal.pipeline import stage_begin

    with broker_mode("memory://") as app:
        sent = []
        app.conf.task_publish_retry = False
        original = app.tasks[FOLD].apply_async

        def count(*args, **kwargs):
            sent.append(FOLD)
            return original(*args, **kwargs)

        app.tasks[FOLD].apply_async = count
        try:
            stage_schedule(FOLD)  # outside a transaction: at once
            for _ in range(2):
                with CaptureQueriesContext(connection) as pending:
                    stage_schedule(FOLD)
                assert [q["sql"].split()[0] for q in pending.captured_queries] == ["SELECT"]
            stage_begin(FOLD)
            stage_schedule(FOLD)
        finally:
            del app.tasks[FOLD].apply_async
    assert sent == [FOLD, FOLD]


def _october_as_rollups(tenant, deployment) -> None:
    """October loaded as rollups only (the demo's way, or raw events archived): two busy
    hours of the tenant, no raw event behind them."""
    for hour, requests in ((LATE_HOUR, 1_152_770), (LATE_HOUR + timedelta(days=5), 600_000)):
        make_hourly_usage(
            tenant, deployment, hour, requests=requests,
            input_tokens=40 * M, ok_input_tokens=40 * M, compliant_input_tokens=40 * M,
            output_tokens=20 * M, ok_output_tokens=20 * M, compliant_output_tokens=20 * M,
            compliant_requests=requests, is_demo=True,
        )  # fmt: skip
        rollup_days({(tenant.pk, deployment.pk, hour.date())})
    raw_months_incomplete_mark(
        pools=[deployment.pool], months=[OCTOBER], reason=IncompleteRawMonth.Reason.LOADED
    )


def _october_figures() -> dict:
    rated = RatedUsage.objects.filter(month_start=OCTOBER)
    month = KpiSnapshot.objects.get(scope="factory", period_kind="month", period_start=OCTOBER)
    row = HourlyUsage.objects.get(hour=LATE_HOUR)
    return {
        "hour": (row.requests, row.input_tokens, row.output_tokens, row.compliant_output_tokens),
        "list_value": sum(rated.values_list("list_value", flat=True), Decimal(0)),
        "realized": sum(rated.values_list("realized", flat=True), Decimal(0)),
        "output_tokens": month.values["output_tokens"],
        "std_gpu_seconds": month.values["std_gpu_seconds"],
        "is_closed": month.is_closed,
    }


def _books() -> tuple:
    invoices = [
        (i.number, i.total, [(line.kind, line.amount) for line in i.lines.all()])
        for i in Invoice.objects.order_by("pk")
    ]
    postings = sorted(Posting.objects.values_list("transaction_id", "account_id", "amount"))
    return invoices, LedgerTransaction.objects.count(), postings


@pytest.mark.both_backends
def test_a_late_event_for_a_closed_month_kept_as_rollups_moves_it_by_exactly_that_event(
    api, tenant_a
):
    """October closed (invoiced), its usage kept only as rollups; one late event for 15
    October 13:30 (10 M input and 10 M output tokens at 0.88 per million each, no discount)
    is folded into that hour, rated into October and measured into October's snapshot,
    each by exactly the event; October's invoice and the ledger stay as they were, and
    November's invoice carries the 17.60 as an adjustment for October."""
    make_priced_model()  # 0.88 / 0.44 / 0.88 per million, R_ref 1000, w_in 0
    make_contract(tenant_a)
    deployment = Pool.objects.get(slug="h100-a").deployments.get()
    Pool.objects.update(in_service_from=OCTOBER)
    _october_as_rollups(tenant_a, deployment)
    stages_run()
    [october_invoice] = close_run(month_start=OCTOBER).issued
    stages_run()  # nothing new: the figures as October closed
    before, books = _october_figures(), _books()
    assert before["hour"] == (1_152_770, 40 * M, 20 * M, 20 * M)
    assert october_invoice.total == Decimal("105.60")  # (80 M input + 40 M output) × 0.88 / M

    late = {"id": "late-1", "tenant": "tenant-a", "model": "llama-70b",
            "time": "2026-10-15T13:30:00Z", "input_tokens": 10 * M, "output_tokens": 10 * M}  # fmt: skip
    response = api.post("/api/v1/usage/events", [late])
    assert response.json() == {"accepted": 1, "duplicates": 0}
    stages_run()

    after = _october_figures()
    assert after["hour"] == (1_152_771, 50 * M, 30 * M, 30 * M)  # the row kept, plus one
    assert after["list_value"] - before["list_value"] == Decimal("17.60")
    assert after["realized"] - before["realized"] == Decimal("17.60")
    assert after["output_tokens"] - before["output_tokens"] == 10 * M
    assert after["std_gpu_seconds"] - before["std_gpu_seconds"] == pytest.approx(10_000, rel=1e-12)
    assert after["is_closed"]
    assert _books() == books  # October's invoice and the ledger unchanged

    [november_invoice] = close_run(month_start=NOVEMBER).issued
    [adjustment] = november_invoice.lines.all()
    assert (adjustment.kind, adjustment.for_month, adjustment.amount) == (
        "adjustment",
        OCTOBER,
        Decimal("17.60"),
    )
