"""Builders for billing tests: prices, contracts and usage posted through the real ingest."""

from datetime import UTC, datetime
from decimal import Decimal

from billing.services.close import close_run
from billing.services.pricing import contract_create, price_create, promotion_grant
from billing.services.rating import rated_usage_update
from metering.models import ServedModel
from metering.services.usage.rollup import usage_fold
from tests.metering.factories import make_deployment

JAN = datetime(2026, 1, 1, tzinfo=UTC)
MARCH = datetime(2026, 3, 1, tzinfo=UTC)
APRIL = datetime(2026, 4, 1, tzinfo=UTC)
M = 1_000_000  # tokens
# 10 M input and 10 M output tokens on 3 March 2026: 8.80 + 8.80 at the list prices.
MARCH_USAGE = {"time": "2026-03-03T00:00:00Z", "input_tokens": 10 * M, "output_tokens": 10 * M}


def make_priced_model(*, model="llama-70b", pool="h100-a", prices=("0.88", "0.44", "0.88")):
    """A deployment of `model` with list prices (input, cached input, output) from January."""
    make_deployment(model=model, pool=pool)
    served = ServedModel.objects.get(slug=model)
    for token_class, per_million in zip(("input", "cached_input", "output"), prices, strict=True):
        price_create(
            model=served,
            token_class=token_class,
            per_million=Decimal(per_million),
            currency="USD",
            effective_from=JAN,
        )
    return served


def make_contract(tenant, *, kind="paid", effective_from=JAN, **terms):
    return contract_create(
        tenant=tenant, kind=kind, effective_from=effective_from, currency="USD", **terms
    )


def make_promotion(tenant, amount: str, *, effective_from=MARCH, description=""):
    """A promotional credit of `amount` USD for `tenant`."""
    return promotion_grant(
        tenant=tenant,
        amount=Decimal(amount),
        currency="USD",
        effective_from=effective_from,
        description=description,
    )


def assert_refused(response, status: int, field: str, message: str) -> None:
    """The API answered `status` with one error: `field` and its exact `message`."""
    assert response.status_code == status, response.json()
    assert response.json() == {"errors": [{"field": field, "message": message}]}


def line_amounts(invoice) -> list[tuple]:
    """The invoice's lines as (kind, amount), in their order."""
    return [(line.kind, line.amount) for line in invoice.lines.all()]


def usage_event(event_id: str, time: str, input_tokens: int, output_tokens: int = 0) -> dict:
    """A usage event without cached tokens (post_usage names the tenant and the model)."""
    return {
        "id": event_id,
        "time": time,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
    }


def make_march_usage(api, tenant, event_id: str, **terms):
    """A contract of `tenant` with `terms` from January, and MARCH_USAGE ingested for it."""
    make_contract(tenant, **terms)
    return post_usage(api, [{"id": event_id, **MARCH_USAGE}], tenant=tenant.slug)


def make_march_invoice(api, tenant, **terms):
    """`tenant`'s March: a priced model, a contract with `terms` and MARCH_USAGE, invoiced by
    the month's close run (the one invoice it issues)."""
    make_priced_model()
    make_march_usage(api, tenant, "a1", **terms)
    [invoice] = close_run(month_start=MARCH).issued
    assert invoice.tenant == tenant
    return invoice


def post_usage(api, events, *, tenant="tenant-a", model="llama-70b"):
    """Ingest events through the API (all-or-nothing), fold them into rollups and rate them,
    as the rollup and rate jobs do."""
    body = [{"tenant": tenant, "model": model, "cached_tokens": 0, **event} for event in events]
    response = api.post("/api/v1/usage/events", body)
    assert response.status_code == 200, response.json()
    usage_fold()
    rated_usage_update()
    return response.json()
