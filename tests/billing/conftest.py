"""Fixtures of the billing tests."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.services.close import close_run
from billing.services.prepaid import prepaid_purchase
from tests.billing.factories import make_contract, make_priced_model, post_usage

OCT = datetime(2026, 10, 1, tzinfo=UTC)
NOV = datetime(2026, 11, 1, tzinfo=UTC)
B = 1_000_000_000


@pytest.fixture
def finance(users):
    """A finance user's browser session, as an API client."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(users["finance"])
    return client


@pytest.fixture
def october(admin_api, tenant_a, tenant_b):
    """tenant-a: a 5,000.00 prepaid purchase on 1 Oct, 6,000.00 of October usage (5,000.00
    drawn from the prepaid, 1,000.00 due); tenant-b: 2,000.00 of usage. Closed on 1 November:
    the issued invoices by tenant slug (the tests issue credit notes on tenant-b's)."""
    make_priced_model(prices=("1", "0.5", "1"))
    make_contract(tenant_a)
    make_contract(tenant_b, discount_pct=Decimal(10))
    prepaid_purchase(
        tenant=tenant_a, amount="5000.00", expires_at=datetime(2027, 3, 31, tzinfo=UTC),
        now=datetime(2026, 10, 1, 9, tzinfo=UTC),
    )  # fmt: skip
    for n in range(3):
        post_usage(admin_api, [{"id": f"a{n}", "time": f"2026-10-0{n + 2}T10:00:00Z",
                                "input_tokens": B, "output_tokens": B}])  # fmt: skip
    post_usage(admin_api, [{"id": "b0", "time": "2026-10-03T10:00:00Z", "input_tokens": B,
                            "output_tokens": B}], tenant="tenant-b")  # fmt: skip
    run = close_run(month_start=OCT, now=NOV.replace(hour=2))
    return {invoice.tenant.slug: invoice for invoice in run.issued}
