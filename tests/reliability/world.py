"""Two tenants with one of everything, built through the services (as the API would).

Tenant A's member is the one who asks; tenant B owns the objects A must never reach. Each of
B's objects carries a marker string that must never appear in a response to A.
"""

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from billing.models import Contract, CreditNote, Invoice, Price, PromotionalCredit, Reservation
from billing.services.credit_notes import credit_note_issue
from billing.services.invoices.draft import invoice_draft
from billing.services.invoices.issue import invoice_finalize
from billing.services.reservations import reservation_create
from flywheel.models import CostModel, FactoryCosts
from flywheel.services.tfom import factory_costs_create
from metering.domain.usage.validation import validate_events
from metering.models import Deployment, Incident, MaintenanceWindow, Pool, ScrapeTarget
from metering.services.sla.incidents import incident_create
from metering.services.sla.maintenance import maintenance_window_create
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import usage_fold
from portal import clock
from portal.events import event_raise
from portal.models import Alert, AlertRule, ApiToken, Delivery, Role, Tenant, WebhookEndpoint
from portal.projects import project_create
from portal.services import TOKEN_PREFIX, token_create, token_digest, user_ensure
from portal.webhooks import secret_new
from tests.billing.factories import MARCH, make_contract, make_priced_model, make_promotion
from tests.flywheel.factories import make_cost_model

ROLES = ("operator", "finance", "investor", "tenant")
# Strings that exist only in tenant B's data (its slug, name, incident, promotion, usage
# totals): none may reach tenant A. A's usage totals 3,000,003 input tokens.
B_MARKERS = ("tenant-b", "Tenant B", "b-only outage", "promo for b", "5000010", "5,000,010")


@dataclass
class World:
    tenant_a: Tenant
    tenant_b: Tenant
    users: dict[str, User]  # one per role; "tenant" is A's member
    member_b: User
    pool: Pool
    deployment: Deployment
    price: Price
    contract_a: Contract
    contract_b: Contract
    promotion_a: PromotionalCredit
    promotion_b: PromotionalCredit
    invoice_a: Invoice
    invoice_b: Invoice
    credit_note_a: CreditNote
    credit_note_b: CreditNote
    incident_a: Incident
    incident_b: Incident
    maintenance: MaintenanceWindow
    scrape_target: ScrapeTarget
    cost_model: CostModel
    factory_costs: FactoryCosts
    token_b: ApiToken
    endpoint_a: WebhookEndpoint
    endpoint_b: WebhookEndpoint
    delivery_a: Delivery
    delivery_b: Delivery
    rule_a: AlertRule
    rule_b: AlertRule
    alert_a: Alert
    alert_b: Alert
    reservation_a: Reservation
    reservation_b: Reservation


def usage_ingest_march(tenant: str, count: int) -> None:
    items = [
        {
            "id": f"{tenant}-{i}",
            "time": (MARCH + timedelta(hours=10, minutes=i)).isoformat(),
            "tenant": tenant,
            "model": "llama-70b",
            "input_tokens": 1_000_000 + i,
            "cached_tokens": 0,
            "output_tokens": 500_000 + i,
        }
        for i in range(count)
    ]
    events, errors = validate_events(items=items, now=clock.now())
    assert not errors, errors
    usage_ingest(events=events, received_at=clock.now())


def world_build() -> World:
    """Tenants A and B, a user per role, and for each tenant: contract, promotion, usage in
    March 2026, an issued invoice (so ledger postings), an incident that touched only it."""
    tenant_a = Tenant.objects.create(slug="tenant-a", name="Tenant A")
    tenant_b = Tenant.objects.create(slug="tenant-b", name="Tenant B")
    users = {
        role: user_ensure(
            username=f"{role}-user",
            role=Role(role),
            tenant=tenant_a if role == "tenant" else None,
        )
        for role in ROLES
    }
    member_b = user_ensure(username="tenant-b-member", role=Role.TENANT, tenant=tenant_b)
    for tenant in (tenant_a, tenant_b):  # one slug in both: only the path's tenant tells
        project_create(tenant=tenant, slug="search", name="Search", by=users["operator"])
    model = make_priced_model()
    deployment = Deployment.objects.get(slug="llama-70b@h100-a")
    pool = deployment.pool
    contract_a = make_contract(tenant_a)
    contract_b = make_contract(tenant_b, discount_pct=Decimal(10))
    promotion_a = make_promotion(tenant_a, "1")
    promotion_b = make_promotion(tenant_b, "2", description="promo for B")
    usage_ingest_march("tenant-a", 3)
    usage_ingest_march("tenant-b", 5)
    usage_fold()
    invoices = {}
    for tenant in (tenant_a, tenant_b):
        invoice, _ = invoice_draft(tenant=tenant, month_start=MARCH)
        invoices[tenant.slug] = invoice_finalize(invoice=invoice, by=None)
    notes = {  # dated in March, as everything of the world is
        slug: credit_note_issue(
            invoice=invoice,
            reason="goodwill",
            settle="balance",
            amount="0.01",
            now=datetime(2026, 3, 31, 12, tzinfo=UTC),
        )
        for slug, invoice in invoices.items()
    }
    started = datetime(2026, 3, 5, 10, tzinfo=UTC)
    incidents = {
        slug: incident_create(
            title=title,
            severity="sev2",
            impact="degraded",
            started_at=started,
            resolved_at=started + timedelta(hours=1),
            deployments=[deployment],
            tenants=[tenant],
            by=users["operator"],
        )
        for slug, title, tenant in (
            ("a", "A-only slowdown", tenant_a),
            ("b", "B-only outage", tenant_b),
        )
    }
    now = clock.now()
    maintenance = maintenance_window_create(
        title="Firmware",
        starts_at=now + timedelta(days=10),
        ends_at=now + timedelta(days=10, hours=2),
        deployments=[deployment],
        by=users["operator"],
    )
    scrape_target = ScrapeTarget.objects.create(
        url="http://127.0.0.1:9/metrics", kind="vllm", pool=pool
    )
    cost_model = make_cost_model(
        pool,
        capex_per_gpu="30000",
        pue="1.3",
        electricity_price_per_kwh="0.1",
        hosting_per_gpu_month="200",
    )
    factory_costs = factory_costs_create(
        staff_per_month=Decimal(1000),
        sga_per_month=Decimal(0),
        effective_from=datetime(2026, 1, 1, tzinfo=UTC),
    )
    token_b, _ = token_create(user=member_b, name="b's token", scopes=["read"])
    endpoints, deliveries = {}, {}
    for tenant in (tenant_a, tenant_b):  # nothing listens there: deliveries stay pending
        endpoints[tenant.slug] = WebhookEndpoint.objects.create(
            url=f"https://hooks.{tenant.slug}.invalid/portal", tenant=tenant, secret=secret_new()
        )
        event = event_raise(
            type="invoice.issued",
            summary=f"Invoice {invoices[tenant.slug].number} issued",
            data={"invoice": invoices[tenant.slug].number},
            tenant=tenant,
            for_factory=False,
        )
        deliveries[tenant.slug] = event.deliveries.get()
    rules, alerts = {}, {}
    for tenant in (tenant_a, tenant_b):  # each tenant's budget, and an alert it raised
        rules[tenant.slug] = AlertRule.objects.create(
            kind="budget", tenant=tenant, params={"amount": "100.00", "thresholds": [50]}
        )
        alerts[tenant.slug] = Alert.objects.create(
            rule=rules[tenant.slug],
            window_start=MARCH,
            threshold="50",
            level="warning",
            value="50.0%",
            summary=f"{tenant.name} reached 50% of its March 2026 budget",
            fired_at=clock.now(),
        )
    reservations = {  # 2 GPUs each of the pool's 8, from the hour in progress, no term
        tenant.slug: reservation_create(
            tenant=tenant,
            deployment=deployment,
            gpus=2,
            hourly_rate=Decimal("2.50"),
            term="none",
            starts_at=now.replace(minute=0, second=0, microsecond=0),
            by=users["operator"],
        )
        for tenant in (tenant_a, tenant_b)
    }
    return World(
        tenant_a=tenant_a,
        tenant_b=tenant_b,
        users=users,
        member_b=member_b,
        pool=pool,
        deployment=deployment,
        price=Price.objects.filter(model=model).first(),
        contract_a=contract_a,
        contract_b=contract_b,
        promotion_a=promotion_a,
        promotion_b=promotion_b,
        invoice_a=invoices["tenant-a"],
        invoice_b=invoices["tenant-b"],
        credit_note_a=notes["tenant-a"],
        credit_note_b=notes["tenant-b"],
        incident_a=incidents["a"],
        incident_b=incidents["b"],
        maintenance=maintenance,
        scrape_target=scrape_target,
        cost_model=cost_model,
        factory_costs=factory_costs,
        token_b=token_b,
        endpoint_a=endpoints["tenant-a"],
        endpoint_b=endpoints["tenant-b"],
        delivery_a=deliveries["tenant-a"],
        delivery_b=deliveries["tenant-b"],
        rule_a=rules["tenant-a"],
        rule_b=rules["tenant-b"],
        alert_a=alerts["tenant-a"],
        alert_b=alerts["tenant-b"],
        reservation_a=reservations["tenant-a"],
        reservation_b=reservations["tenant-b"],
    )


def bearer(user: User, scopes=("read",)) -> str:
    """A raw bearer token for `user`. Scopes the role may not issue are written directly, to
    show that the role, not only the token, stops a write."""
    try:
        _, raw = token_create(user=user, name="test", scopes=scopes)
    except ValidationError:
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        ApiToken.objects.create(
            user=user, name="forced", prefix=raw[:12], digest=token_digest(raw), scopes=list(scopes)
        )
    return raw
