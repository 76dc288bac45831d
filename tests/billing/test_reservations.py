"""Reservations end to end (kpis.md 3d): kpis.md's worked example through ingestion, the fold,
the rate stage, the month's invoice and the ledger, and the term rules, each leaving the
month's invoices as they were."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from billing.domain.reservations import OVERAGE, UNDERUSED, ReservationConflict
from billing.models import RatedTenantMonth, RatedUsage, Reservation
from billing.selectors.close import close_report
from billing.selectors.focus import focus_rows
from billing.selectors.ledger import account_balances
from billing.selectors.reservations import (
    reservation_overage_evaluate,
    reservation_underused_evaluate,
)
from billing.services.close import close_run
from billing.services.pricing import price_create
from billing.services.rating import rated_usage_update
from billing.services.reservations import (
    reservation_cancel,
    reservation_create,
    reservation_raise,
)
from flywheel.selectors.measurement import FactoryData
from metering.models import Deployment, ServedModel
from portal import clock
from portal.closing import month_close
from portal.errors import FieldError
from portal.models import AlertRule
from tests.billing.factories import APRIL, JAN, MARCH, M, make_contract, post_usage, usage_event
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.both_backends

BEFORE = datetime(2026, 3, 2, 9, tzinfo=UTC)  # the reservation is made an hour before it starts
AFTER = datetime(2026, 4, 2, 9, tzinfo=UTC)  # March over


@pytest.fixture
def deployment(db):
    """llama-70b@h100-a: R_ref 2,500 tok/s per GPU, w_in 0, on 8 GPUs; output 2.00."""
    make_deployment(r_ref="2500", gpus=8)
    price_create(
        model=ServedModel.objects.get(slug="llama-70b"),
        token_class="output",
        per_million=Decimal("2.00"),
        currency="USD",
        effective_from=JAN,
    )
    return Deployment.objects.get()


def reserve(
    tenant, deployment, *, gpus=2, term="none", starts_at=datetime(2026, 3, 2, 10, tzinfo=UTC)
):
    return reservation_create(
        tenant=tenant,
        deployment=deployment,
        gpus=gpus,
        hourly_rate=Decimal("4.00"),
        term=term,
        starts_at=starts_at,
    )


@pytest.mark.parametrize("now", [BEFORE], indirect=True)
def test_the_worked_example_from_ingestion_to_the_ledger(admin_api, users, tenant_a, deployment):
    make_contract(tenant_a)
    reservation = reserve(tenant_a, deployment)
    reservation_cancel(reservation=reservation, at=datetime(2026, 3, 2, 12, tzinfo=UTC))
    clock.clock_set(AFTER)
    post_usage(admin_api, [
        usage_event("a", "2026-03-02T10:10:00Z", 0, 10 * M),
        usage_event("b", "2026-03-02T10:20:00Z", 0, 6 * M),
        usage_event("c", "2026-03-02T10:30:00Z", 0, 4 * M),
        usage_event("d", "2026-03-02T11:15:00Z", 0, 3 * M),
    ])  # fmt: skip

    rows = RatedUsage.objects.filter(sale="paid").order_by("hour", "-covered")
    assert [(r.hour.hour, r.covered, r.output_tokens, r.list_value, r.realized) for r in rows] == [
        (10, True, 18 * M, Decimal("36.00"), Decimal("8.00")),  # 10 + 6 + the crossing 2 M
        (10, False, 2 * M, Decimal("4.00"), Decimal("4.00")),
        (11, True, 3 * M, Decimal("6.00"), Decimal("6.00")),  # 2.00 of its fee unused
    ]
    utilization = admin_api.get(
        f"/api/v1/reservations/{reservation.pk}/utilization"
        "?from=2026-03-02T00:00:00Z&to=2026-03-03T00:00:00Z&granularity=hour"
    ).json()
    hour_10 = {"start": "2026-03-02T10:00:00Z", "cap": 18 * M, "covered": 18 * M,
               "utilization": "1.000000", "fee": "8.00", "covered_realized": "8.00",
               "unused": "0.00"}  # fmt: skip
    hour_11 = {"start": "2026-03-02T11:00:00Z", "cap": 18 * M, "covered": 3 * M,
               "utilization": "0.166667", "fee": "8.00", "covered_realized": "6.00",
               "unused": "2.00"}  # fmt: skip
    assert utilization["rows"] == [hour_10, hour_11]
    # utilization 21 M / 36 M; unused 2.00 of 16.00
    assert utilization["total"] == {"start": "2026-03-02T10:00:00Z", "cap": 36 * M,
                                    "covered": 21 * M, "utilization": "0.583333",
                                    "fee": "16.00", "covered_realized": "14.00",
                                    "unused": "2.00"}  # fmt: skip
    # The cockpit's March as rated (not closed yet): covered 8.00 + 6.00, on demand 4.00 and
    # the 2.00 unused once the month is over
    market = admin_api.get("/api/v1/market?period=2026-03").json()
    assert (market["revenue"], market["revenue_sources"][0]["source"]) == ("20.00", "rating")
    [invoice] = close_run(month_start=MARCH).issued
    assert [
        (line.kind, line.quantity, line.gpu_hours, line.list_unit_price, line.amount)
        for line in invoice.lines.all()
    ] == [
        ("usage", 2 * M, None, Decimal("2.00"), Decimal("4.00")),
        ("reservation", 0, Decimal("4.000000"), Decimal("4.00"), Decimal("16.00")),
    ]
    assert invoice.lines.get(kind="reservation").reservation == reservation
    assert invoice.total == Decimal("20.00")
    # The close ties out: rated 4.00 on demand + 16.00 of fees = 20.00 invoiced, no rounding
    report = close_report(month=MARCH)
    assert (report.rated, report.invoiced, report.rounding) == (
        Decimal("20.00"),
        Decimal("20.00"),
        Decimal(0),
    )
    rows = list(focus_rows(user=users["finance"], month=MARCH))
    assert [
        (r["ChargeCategory"], r["CommitmentDiscountStatus"], r["BilledCost"], r["EffectiveCost"])
        for r in rows
    ] == [
        ("Usage", None, Decimal("4.00"), Decimal("4.00")),
        ("Purchase", None, Decimal("16.00"), Decimal(0)),
        ("Usage", "Used", Decimal(0), Decimal("14.00")),
        ("Usage", "Unused", Decimal(0), Decimal("2.00")),
    ]
    assert rows[1]["CommitmentDiscountQuantity"] == 4  # GPU-hours
    assert rows[1]["CommitmentDiscountType"] == "Dedicated capacity"
    assert rows[2]["ConsumedQuantity"] == 21 * M
    assert sum(r["BilledCost"] for r in rows) == invoice.total
    # TFOM revenue: realized 8.00 + 6.00 + 4.00 and the 2.00 unused fee, like a shortfall
    data = FactoryData(start=MARCH, end=APRIL, snapshots=False)
    unused, credits = data.revenue_adjustments(start=MARCH, end=APRIL)
    assert abs(unused - Decimal("2.00")) < Decimal("1e-15") and credits == 0
    # The KPIs of the two hours (kpis.md 3d): 8 GPUs in service, A = 57,600 GPU-seconds;
    # reserved 2 × 7,200 = 14,400 (a quarter); sold: 14,400 and the 2 M on demand, 800 std
    kpis = admin_api.get("/api/v1/kpis?from=2026-03-02T10:00:00Z&to=2026-03-02T12:00:00Z").json()
    assert kpis["available_gpu_seconds"] == 57_600
    assert kpis["reserved_gpu_seconds"] == 14_400
    assert kpis["reserved_share"] == 0.25
    assert kpis["capacity_sold"] == pytest.approx(15_200 / 57_600, abs=1e-12)
    assert kpis["reservation_utilization"] == pytest.approx(21 / 36, abs=1e-12)  # 21 M / 36 M
    balances = account_balances()
    assert balances[("receivable:tenant-a", "USD")] == Decimal("20.00")
    assert balances[("revenue:reservations", "USD")] == Decimal("-16.00")
    assert balances[("revenue:llama-70b", "USD")] == Decimal("-4.00")
    assert sum(balances.values()) == 0


@pytest.mark.parametrize("now", [BEFORE], indirect=True)
def test_term_rules_refuse_and_leave_the_invoices_as_they_were(tenant_a, deployment):
    make_contract(tenant_a)
    reservation = reserve(tenant_a, deployment, term="1m")
    assert reservation.ends_at == datetime(2026, 4, 2, 10, tzinfo=UTC)
    raised = reservation_raise(
        reservation=reservation, gpus=4, effective_from=datetime(2026, 3, 3, tzinfo=UTC)
    )
    assert raised.gpus == 4
    rated_usage_update()

    with pytest.raises(ReservationConflict) as cancel:
        reservation_cancel(reservation=reservation, at=datetime(2026, 3, 10, tzinfo=UTC))
    assert cancel.value.field == "ends_at"
    with pytest.raises(ReservationConflict) as lower:
        reservation_raise(
            reservation=reservation, gpus=3, effective_from=datetime(2026, 3, 5, tzinfo=UTC)
        )
    assert lower.value.field == "gpus"
    with pytest.raises(ReservationConflict) as pool:
        reserve(tenant_a, deployment, gpus=5)  # 4 of the pool's 8 held from 3 March
    assert pool.value.field == "gpus"
    assert "h100-a has 8 GPUs: reservations would hold 9 of them" in str(pool.value)
    month_close(month=datetime(2026, 2, 1, tzinfo=UTC))
    with pytest.raises(FieldError) as closed:
        reserve(tenant_a, deployment, gpus=1, starts_at=datetime(2026, 2, 27, tzinfo=UTC))
    assert closed.value.field == "starts_at"

    assert Reservation.objects.count() == 1
    clock.clock_set(datetime(2026, 5, 2, tzinfo=UTC))
    [march] = close_run(month_start=MARCH).issued
    # 2 GPUs for 14 hours of 2 March, then 4 GPUs to the month's end (29 days x 24 h).
    [line] = march.lines.all()
    assert (line.kind, line.gpu_hours, line.amount) == (
        "reservation",
        Decimal(2 * 14 + 4 * 29 * 24),
        Decimal(4 * (2 * 14 + 4 * 29 * 24)).quantize(Decimal("0.01")),
    )


@pytest.mark.parametrize("now", [BEFORE], indirect=True)
def test_the_api_applies_the_term_rules_with_409s_naming_the_field(admin_api, tenant_a, deployment):
    make_contract(tenant_a)
    body = {
        "tenant": "tenant-a", "deployment": "llama-70b@h100-a", "gpus": 2, "hourly_rate": "4.00",
        "term": "1m", "starts_at": "2026-03-02T10:00:00Z",
    }  # fmt: skip
    created = admin_api.post("/api/v1/reservations", body, format="json")
    assert created.status_code == 201, created.json()
    pk = created.json()["id"]
    assert created.json()["ends_at"] == "2026-04-02T10:00:00Z"

    def refused(response, status, field):
        assert response.status_code == status, response.json()
        assert [error["field"] for error in response.json()["errors"]] == [field]

    raised = admin_api.patch(
        f"/api/v1/reservations/{pk}", {"gpus": 4, "effective_from": "2026-03-03T00:00:00Z"},
        format="json",
    )  # fmt: skip
    assert raised.status_code == 200, raised.json()
    assert (raised.json()["gpus"], len(raised.json()["versions"])) == (4, 2)
    refused(
        admin_api.patch(
            f"/api/v1/reservations/{pk}", {"gpus": 3, "effective_from": "2026-03-05T00:00:00Z"},
            format="json",
        ),
        409, "gpus",
    )  # fmt: skip
    refused(
        admin_api.post(f"/api/v1/reservations/{pk}/cancel", {"at": "2026-03-10T00:00:00Z"}),
        409, "ends_at",
    )  # fmt: skip
    refused(admin_api.post("/api/v1/reservations", {**body, "gpus": 5}, format="json"), 409, "gpus")
    refused(
        admin_api.post(
            "/api/v1/reservations", {**body, "starts_at": "2026-03-02T10:30:00Z"}, format="json"
        ),
        400, "starts_at",
    )  # fmt: skip
    assert Reservation.objects.count() == 1


@pytest.mark.parametrize("now", [BEFORE], indirect=True)
def test_a_tenant_reads_only_its_own_reservations_and_investors_none(
    users, token_client, make_user, tenant_a, tenant_b, deployment
):
    own = reserve(tenant_a, deployment)
    reserve(tenant_b, deployment)

    member = token_client(users["tenant"]).get("/api/v1/reservations")
    assert [row["id"] for row in member.json()["results"]] == [own.pk]
    other = Reservation.objects.get(tenant=tenant_b)
    assert token_client(users["tenant"]).get(f"/api/v1/reservations/{other.pk}").status_code == 404
    investor = APIClient()
    investor.force_login(users["investor"])
    assert investor.get("/api/v1/reservations").status_code == 403
    assert len(token_client(users["finance"]).get("/api/v1/reservations").json()["results"]) == 2
    write = token_client(users["tenant"], scopes=["read", "notify"]).post(
        "/api/v1/reservations", {"tenant": "tenant-a"}, format="json"
    )
    assert write.status_code == 403


def test_service_tier_multipliers_are_effective_dated_and_refuse_standard(
    admin_api, users, session_client
):
    created = admin_api.post(
        "/api/v1/service-tiers",
        {"tier": "priority", "multiplier": "2.0", "effective_from": "2027-01-01T00:00:00Z"},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json()["tier"] == "priority"
    standard = admin_api.post(
        "/api/v1/service-tiers",
        {"tier": "standard", "multiplier": "2.0", "effective_from": "2027-01-01T00:00:00Z"},
        format="json",
    )
    assert standard.status_code == 400
    assert standard.json()["errors"][0]["field"] == "tier"
    # The price book: the multipliers in force now (priority's 2.0 only from 2027).
    book = session_client(users["finance"]).get("/billing/prices/").content.decode()
    assert "priority × 1.75, flex × 0.5, batch × 0.5" in book


@pytest.mark.parametrize("now", [BEFORE], indirect=True)
def test_the_pages_show_a_reservation_its_utilization_and_the_tenants_own(
    admin_api, users, session_client, tenant_a, tenant_b, deployment
):
    make_contract(tenant_a)
    reservation = reserve(tenant_a, deployment)
    reservation_cancel(reservation=reservation, at=datetime(2026, 3, 2, 12, tzinfo=UTC))
    other = reserve(tenant_b, deployment, starts_at=datetime(2026, 3, 3, tzinfo=UTC))
    clock.clock_set(datetime(2026, 3, 2, 13, tzinfo=UTC))
    post_usage(admin_api, [usage_event("a", "2026-03-02T10:10:00Z", 0, 20 * M),
                           usage_event("b", "2026-03-02T11:15:00Z", 0, 3 * M)])  # fmt: skip

    client = session_client(users["finance"])
    listed = client.get("/billing/reservations/").content.decode()
    assert f"R-{reservation.pk}" in listed and f"R-{other.pk}" in listed
    # The list reads its reservations' figures together: a third adds no query.
    with CaptureQueriesContext(connection) as two:
        client.get("/billing/reservations/")
    third = reserve(tenant_a, deployment, starts_at=datetime(2026, 3, 4, tzinfo=UTC))
    with CaptureQueriesContext(connection) as three:
        assert f"R-{third.pk}" in client.get("/billing/reservations/").content.decode()
    assert len(three) == len(two), (len(two), len(three))
    detail = client.get(
        f"/billing/reservations/{reservation.pk}/?from=2026-03-02T00:00:00Z&to=2026-03-03T00:00:00Z"
    ).content.decode()
    # Hour 10: 18 M covered of 18 M, 2 M overage; hour 11: 3 M of 18 M, 2.00 unused.
    assert "58.3%" in detail and "16.00" in detail and "2.00" in detail
    assert 'id="utilization-chart"' in detail

    member = session_client(users["tenant"])
    home = member.get("/").content.decode()
    assert f"R-{reservation.pk}" in home and f"R-{other.pk}" not in home
    assert member.get(f"/billing/reservations/{other.pk}/").status_code == 404


@pytest.mark.parametrize("now", [BEFORE], indirect=True)
def test_the_reservation_alerts_by_hand(admin_api, users, token_client, tenant_a, deployment):
    """Hour 10: 18 M covered, 2 M overage (11% of 18 M); hour 11: 3 M covered, none over.
    Overage above 10% for 1 hour fires at 11:00 (hour 10), not for 2 hours; utilization over
    the day to 12:00, 21 M of 36 M = 58.3%, is below 60% (fires), not below 50%."""
    make_contract(tenant_a)
    reservation = reserve(tenant_a, deployment)
    reservation_cancel(reservation=reservation, at=datetime(2026, 3, 2, 12, tzinfo=UTC))
    clock.clock_set(datetime(2026, 3, 2, 12, 30, tzinfo=UTC))
    post_usage(admin_api, [
        usage_event("a", "2026-03-02T10:10:00Z", 0, 20 * M),
        usage_event("d", "2026-03-02T11:15:00Z", 0, 3 * M),
    ])  # fmt: skip

    rules = token_client(users["operator"], scopes=["read", "notify"])

    def rule(kind, **params):
        response = rules.post(
            "/api/v1/alert-rules", {"kind": kind, "tenant": "tenant-a", "params": params},
            format="json",
        )  # fmt: skip
        assert response.status_code == 201, response.json()
        return AlertRule.objects.get(pk=response.json()["id"])

    over_1h, over_2h = rule(OVERAGE, percent=10, hours=1), rule(OVERAGE, percent=10, hours=2)
    at_11 = datetime(2026, 3, 2, 11, 30, tzinfo=UTC)
    fired = reservation_overage_evaluate([over_1h, over_2h], at_11).findings
    assert [(f.rule, f.scope_key, f.value) for f in fired] == [
        (over_1h, "llama-70b@h100-a", "11.1%")
    ]
    under_60, under_50 = rule(UNDERUSED, percent=60, days=1), rule(UNDERUSED, percent=50, days=1)
    at_12 = datetime(2026, 3, 2, 12, 30, tzinfo=UTC)
    found = reservation_underused_evaluate([under_60, under_50], at_12).findings
    assert [(f.rule, f.value) for f in found] == [(under_60, "58.3%")]

    refused = rules.post(
        "/api/v1/alert-rules",
        {"kind": OVERAGE, "tenant": "tenant-a", "params": {"hours": 0}},
        format="json",
    )
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "params.hours"
    unknown = rules.post(
        "/api/v1/alert-rules",
        {"kind": UNDERUSED, "tenant": "tenant-a", "params": {"hours": 3}},
        format="json",
    )
    assert unknown.json()["errors"][0]["field"] == "params.hours"


@pytest.mark.parametrize("now", [BEFORE], indirect=True)
def test_the_status_gives_gateways_capacity_rate_and_headroom(admin_api, tenant_a, deployment):
    """2 GPUs x 2,500 tok/s = 5,000 tok/s; 1.2 M output tokens in 10:30-10:35: 4,000 tok/s,
    1,000 of headroom."""
    make_contract(tenant_a)
    reserve(tenant_a, deployment)
    clock.clock_set(datetime(2026, 3, 2, 10, 36, tzinfo=UTC))
    post_usage(admin_api, [usage_event("a", "2026-03-02T10:31:00Z", 0, 1_200_000)])

    [status] = admin_api.get("/api/v1/reservations/status?tenant=tenant-a").json()
    assert (status["capacity_tok_s"], status["current_tok_s"], status["headroom_tok_s"]) == (
        "5000.00", "4000.00", "1000.00",
    )  # fmt: skip
    assert status["as_of"] == "2026-03-02T10:35:00Z"


@pytest.mark.parametrize("now", [BEFORE], indirect=True)
def test_a_month_a_reservation_bills_without_usage_is_rated_when_it_begins(tenant_a, deployment):
    """April: 2 GPUs x 720 hours x 4.00 = 5,760.00, though nothing of April is used or
    changed."""
    make_contract(tenant_a)
    reserve(tenant_a, deployment)
    rated_usage_update()
    clock.clock_set(datetime(2026, 4, 15, tzinfo=UTC))
    rated_usage_update()

    april = RatedTenantMonth.objects.get(tenant=tenant_a, month_start=APRIL)
    assert (april.usage_amount, april.reserved_amount) == (Decimal("5760.00"), Decimal("5760.00"))
