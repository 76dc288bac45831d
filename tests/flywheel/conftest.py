"""Fixtures of the flywheel tests."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.services.close import close_run
from billing.services.credit_notes import credit_note_issue
from metering.models import Pool
from portal.models import Tenant
from tests.billing.factories import JAN, make_contract, make_priced_model, post_usage
from tests.conftest import token_client_make
from tests.flywheel.factories import make_cost_model

D = Decimal
M = 1_000_000
FEB, MARCH = datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC)


def _usage(api, tenant: str, event_id: str, time: str, millions: int) -> None:
    """`millions` M input and as many output tokens: 2 × 0.88 per million each."""
    post_usage(
        api,
        [
            {
                "id": event_id,
                "time": time,
                "input_tokens": millions * M,
                "output_tokens": millions * M,
            }
        ],
        tenant=tenant,
    )


@pytest.fixture
def books_open(db, users, tenant_a, tenant_b):
    """February: A 10 M + 10 M (17.60), C 5 M + 5 M (8.80). March: A 20 M + 20 M (35.20:
    it expanded), B 5 M + 5 M (8.80: new), C nothing (it left). February closed, March
    open; a credit note of 5.00 on A's February invoice dated 10 March. In service since
    January."""
    return books_open_build(users, tenant_a, tenant_b)


def books_open_build(users, tenant_a, tenant_b):
    """`books_open`'s books; the operator's API client it wrote them with."""
    api = token_client_make(users["operator"], scopes=("admin", "ingest", "read"))
    make_priced_model()
    Pool.objects.update(in_service_from=JAN)
    make_cost_model(Pool.objects.get())
    tenant_c = Tenant.objects.create(slug="tenant-c", name="Tenant C")
    for tenant in (tenant_a, tenant_b, tenant_c):
        make_contract(tenant)
    _usage(api, "tenant-a", "a-feb", "2026-02-10T12:00:00Z", 10)
    _usage(api, "tenant-c", "c-feb", "2026-02-11T12:00:00Z", 5)
    _usage(api, "tenant-a", "a-mar", "2026-03-10T12:00:00Z", 20)
    _usage(api, "tenant-b", "b-mar", "2026-03-20T12:00:00Z", 5)
    [feb_a, _] = sorted(close_run(month_start=FEB, now=datetime(2026, 3, 1, 2, tzinfo=UTC)).issued,
                        key=lambda invoice: invoice.tenant.slug)  # fmt: skip
    assert (feb_a.tenant, feb_a.total) == (tenant_a, D("17.60"))
    credit_note_issue(
        invoice=feb_a,
        reason="goodwill",
        settle="balance",
        amount=D("5.00"),
        now=datetime(2026, 3, 10, 9, tzinfo=UTC),
    )
    return api


@pytest.fixture
def books(books_open):
    """`books_open` with March closed too."""
    close_run(month_start=MARCH, now=datetime(2026, 4, 1, 2, tzinfo=UTC))
    return books_open
