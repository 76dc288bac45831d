"""The reservation pages in a browser, on kpis.md 3d's worked example: the list, the
detail's utilization against capacity, the tenant's own on its home, and the invoice with
its reservation line (page and PDF)."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.models import Invoice
from billing.services.close import close_run
from billing.services.pricing import contract_create, price_create
from billing.services.rating import rated_usage_update
from billing.services.reservations import reservation_cancel, reservation_create
from metering.domain.usage.validation import validate_events
from metering.models import Deployment, ServedModel
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import usage_fold
from portal import clock
from portal.models import Tenant
from tests.conftest import PASSWORD
from tests.e2e.conftest import SCREENSHOTS, login, screenshot
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.e2e
M = 1_000_000


@pytest.fixture
def worked_example(transactional_db, make_user):
    """Tenant A's 2-GPU reservation of 2 March 10:00-12:00 and its four events, rated and
    invoiced (the March close, on 2 April)."""
    tenant = Tenant.objects.create(slug="tenant-a", name="Tenant A")
    clock.clock_set(datetime(2026, 3, 2, 9, tzinfo=UTC))
    make_deployment(r_ref="2500", gpus=8)
    price_create(model=ServedModel.objects.get(slug="llama-70b"), token_class="output",
                 per_million=Decimal("2.00"), currency="USD",
                 effective_from=datetime(2026, 1, 1, tzinfo=UTC))  # fmt: skip
    contract_create(tenant=tenant, kind="paid", currency="USD",
                    effective_from=datetime(2026, 1, 1, tzinfo=UTC))  # fmt: skip
    reservation = reservation_create(
        tenant=tenant, deployment=Deployment.objects.get(), gpus=2, hourly_rate=Decimal("4.00"),
        term="none", starts_at=datetime(2026, 3, 2, 10, tzinfo=UTC),
    )  # fmt: skip
    reservation_cancel(reservation=reservation, at=datetime(2026, 3, 2, 12, tzinfo=UTC))
    now = datetime(2026, 4, 2, 9, tzinfo=UTC)
    clock.clock_set(now)
    events, errors = validate_events(items=[
        {"id": id_, "time": f"2026-03-02T{time}:00Z", "tenant": "tenant-a", "model": "llama-70b",
         "input_tokens": 0, "output_tokens": tokens}
        for id_, time, tokens in (("a", "10:10", 10 * M), ("b", "10:20", 6 * M),
                                  ("c", "10:30", 4 * M), ("d", "11:15", 3 * M))
    ], now=now)  # fmt: skip
    assert not errors
    usage_ingest(events=events, received_at=now)
    usage_fold()
    rated_usage_update()
    [invoice] = close_run(month_start=datetime(2026, 3, 1, tzinfo=UTC)).issued
    make_user("finance", username="finance")
    make_user("tenant", tenant=tenant, username="member")
    return reservation, invoice


def test_the_reservation_pages_and_the_invoice_with_its_line(worked_example, page):
    reservation, invoice = worked_example
    after = clock.now()
    clock.clock_set(datetime(2026, 3, 2, 13, tzinfo=UTC))  # the pages read March so far
    login(page, "finance", PASSWORD)
    page.goto("/billing/reservations/")
    row = page.get_by_role("row", name=f"R-{reservation.pk}")
    assert "16.00" in row.inner_text() and "58.3%" in row.inner_text()
    screenshot(page, "reservations-list")

    page.goto(
        f"/billing/reservations/{reservation.pk}/?from=2026-03-02T00:00:00Z&to=2026-03-03T00:00:00Z"
    )
    page.wait_for_selector("#utilization-chart .main-svg")
    assert page.get_by_text("58.3%").first.is_visible()
    screenshot(page, "reservation-detail")

    page.context.clear_cookies()
    login(page, "member", PASSWORD)
    page.goto("/")
    assert "58.3%" in page.locator("#reservations").inner_text()
    screenshot(page, "tenant-home-reservation")

    clock.clock_set(after)
    page.context.clear_cookies()
    login(page, "finance", PASSWORD)
    page.goto(f"/billing/invoices/{invoice.pk}/")
    assert page.get_by_text("Reservation").first.is_visible()
    assert invoice.total == Decimal("20.00")
    screenshot(page, "invoice-with-reservation")
    pdf = page.request.get(f"/billing/invoices/{invoice.pk}/pdf/")
    import pypdfium2

    document = pypdfium2.PdfDocument(pdf.body())
    assert "GPU-hours" in document[0].get_textpage().get_text_range()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    document[0].render(scale=2).to_pil().save(SCREENSHOTS / "invoice-with-reservation-pdf.png")
    assert Invoice.objects.count() == 1
