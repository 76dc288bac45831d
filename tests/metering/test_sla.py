"""SLA per tenant and month from the database (kpis.md 3 and 3b); every figure by hand.

April 2026 has 30 days: M = 30 x 86,400 = 2,592,000 s. Incidents and maintenance are
written through the services, usage as hourly rollups (or events through ingestion)."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest

from billing.domain.credits import credit_pct_for
from metering.domain.usage.validation import validate_events
from metering.selectors.sla.months import sla_month_get, sla_month_list
from metering.services.factory import VersionSpec, deployment_version_add
from metering.services.sla.incidents import incident_create, incident_update_add
from metering.services.sla.maintenance import maintenance_window_create
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import usage_fold
from portal.models import Tenant
from tests.metering.factories import make_deployment, make_hourly_usage

pytestmark = pytest.mark.both_backends

APRIL = datetime(2026, 4, 1, tzinfo=UTC)
MAY = datetime(2026, 5, 1, tzinfo=UTC)
AFTER = datetime(2026, 5, 3, tzinfo=UTC)  # the month is closed
M = 2_592_000


def at(day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, 4, day, hour, minute, second, tzinfo=UTC)


@pytest.fixture
def factory(db):
    """Two deployments; tenant-a uses llama, tenant-b uses qwen, tenant-c uses both."""
    llama = make_deployment(model="llama-70b", pool="h100-a", w_in="0.5", ttft=2000, tpot=50)
    qwen = make_deployment(model="qwen-32b", pool="h200-a", r_ref="2000")
    tenants = {
        slug: Tenant.objects.create(slug=slug, name=slug.title())
        for slug in ("tenant-a", "tenant-b", "tenant-c")
    }
    for slug, deployment in (
        ("tenant-a", llama),
        ("tenant-b", qwen),
        ("tenant-c", llama),
        ("tenant-c", qwen),
    ):
        use(tenants[slug], deployment, at(2, 10))
    return {"llama": llama, "qwen": qwen, **tenants}


def use(tenant, deployment, hour, **sums):
    """One compliant request of 100 output tokens in the hour, unless `sums` say otherwise."""
    return make_hourly_usage(
        tenant,
        deployment,
        hour,
        **{"requests": 1, "output_tokens": 100, "compliant_requests": 1, **sums},
    )


def outage(start, seconds, *, impact="major_outage", deployments=(), tenants=(), pools=()):
    return incident_create(
        title=f"{impact} at {start:%d %H:%M}",
        severity="sev2",
        impact=impact,
        started_at=start,
        resolved_at=start + timedelta(seconds=seconds),
        deployments=deployments,
        pools=pools,
        tenants=tenants,
        by=None,
        now=AFTER,
    )


def april(tenant, now=AFTER):
    return sla_month_get(tenant=tenant, month_start=APRIL, now=now)


def test_sla_month_43_2_minutes_of_major_outage_is_exactly_99_90_percent(factory):
    # 43.2 min = 2,592 s on llama; 1 - 2,592 / 2,592,000 = 0.999 exactly
    incident = outage(at(10, 12), 2_592, deployments=[factory["llama"]])

    figures = april(factory["tenant-a"])

    assert figures.month == "2026-04"
    assert not figures.is_month_to_date
    assert figures.month_seconds == M
    assert figures.downtime_seconds == 2_592
    assert figures.uptime == Fraction(999, 1000)
    assert figures.incidents == (incident,)
    assert credit_pct_for(uptime=figures.uptime) == 0  # 0.999 is not below 0.999


@pytest.mark.parametrize(
    ("down_seconds", "threshold", "is_below"),
    [
        (2_592, Fraction(999, 1000), False),  # 99.9% exactly
        (2_593, Fraction(999, 1000), True),
        (25_920, Fraction(99, 100), False),  # 99% exactly: 7 h 12 min
        (25_921, Fraction(99, 100), True),
        (129_600, Fraction(95, 100), False),  # 95% exactly: 36 h
        (129_601, Fraction(95, 100), True),
    ],
)
def test_sla_month_uptime_at_each_tier_edge(factory, down_seconds, threshold, is_below):
    outage(at(3), down_seconds, deployments=[factory["llama"]])

    uptime = april(factory["tenant-a"]).uptime

    assert uptime == 1 - Fraction(down_seconds, M)
    assert (uptime < threshold) is is_below
    assert (uptime >= threshold) is not is_below


def test_sla_month_tier_edges_give_the_default_credit_percent(factory):
    # one tenant per edge is overkill; the pure tiers are applied to the DB uptime here
    outage(at(3), 25_921, deployments=[factory["llama"]])
    outage(at(20), 2_592, deployments=[factory["qwen"]])

    assert credit_pct_for(uptime=april(factory["tenant-a"]).uptime) == 25
    assert credit_pct_for(uptime=april(factory["tenant-b"]).uptime) == 0
    # tenant-c used both: 25,921 + 2,592 = 28,513 s down
    assert april(factory["tenant-c"]).uptime == 1 - Fraction(28_513, M)


def test_sla_month_partial_outage_weighs_0_3(factory):
    # 10 h partial = 36,000 s x 0.3 = 10,800 s; 1 - 10,800 / 2,592,000 = 239/240
    outage(at(8), 36_000, impact="partial_outage", deployments=[factory["llama"]])

    figures = april(factory["tenant-a"])

    assert figures.downtime_seconds == Decimal("10800.0")
    assert figures.uptime == Fraction(239, 240)


def test_sla_month_degraded_counts_zero_but_is_listed(factory):
    incident = outage(at(8), 100 * 3600, impact="degraded", deployments=[factory["llama"]])

    figures = april(factory["tenant-a"])

    assert figures.downtime_seconds == 0
    assert figures.uptime == 1
    assert figures.incidents == (incident,)


def test_sla_month_impact_follows_the_updates(factory):
    # opened degraded at 10:00; major from 11:00 (1,800 s), partial from 11:30 until the
    # resolution at 12:30 (3,600 s x 0.3 = 1,080 s): D = 2,880; 1 - 2,880 / 2,592,000 = 899/900
    incident = incident_create(
        title="Slow, then down",
        severity="sev2",
        impact="degraded",
        started_at=at(10, 10),
        deployments=[factory["llama"]],
        by=None,
        now=at(10, 10),
    )
    incident_update_add(
        incident=incident,
        status="identified",
        impact="major_outage",
        time=at(10, 11),
        by=None,
        now=at(10, 11),
    )
    incident_update_add(
        incident=incident,
        status="monitoring",
        impact="partial_outage",
        time=at(10, 11, 30),
        by=None,
        now=at(10, 11, 30),
    )
    incident_update_add(
        incident=incident, status="resolved", time=at(10, 12, 30), by=None, now=at(10, 12, 30)
    )

    figures = april(factory["tenant-a"])

    assert figures.downtime_seconds == 2_880
    assert figures.uptime == Fraction(899, 900)


def test_sla_month_excludes_maintenance_announced_in_advance(factory):
    # maintenance Apr 5 00:00 - Apr 6 00:00 (86,400 s) on llama, as two overlapping windows;
    # major outage Apr 5 22:00 - Apr 6 01:00: only 1 h lies outside.
    # 1 - 3,600 / (2,592,000 - 86,400) = 1 - 3,600 / 2,505,600 = 695/696
    for start, end in ((at(5), at(5, 12)), (at(5, 6), at(6))):
        maintenance_window_create(
            title="Upgrade",
            starts_at=start,
            ends_at=end,
            deployments=[factory["llama"]],
            by=None,
            now=at(1),
        )
    outage(at(5, 22), 3 * 3600, deployments=[factory["llama"]])

    a = april(factory["tenant-a"])
    b = april(factory["tenant-b"])

    assert a.maintenance_seconds == 86_400
    assert a.downtime_seconds == 3_600
    assert a.uptime == Fraction(695, 696)
    assert len(a.maintenance_windows) == 2
    # tenant-b used only qwen: neither the window nor the incident concern it
    assert (b.maintenance_seconds, b.uptime, b.incidents) == (0, 1, ())


def test_sla_month_maintenance_of_a_pool_counts_for_its_deployments(factory):
    # a whole day on pool h200-a: tenant-b's M - W = 2,592,000 - 86,400 = 2,505,600 s;
    # 2,505 s of major outage outside it: 1 - 2,505 / 2,505,600
    maintenance_window_create(
        title="Pool h200-a",
        starts_at=at(5),
        ends_at=at(6),
        pools=[factory["qwen"].pool],
        by=None,
        now=at(1),
    )
    outage(at(20), 2_505, deployments=[factory["qwen"]])

    figures = april(factory["tenant-b"])

    assert figures.maintenance_seconds == 86_400
    assert figures.uptime == 1 - Fraction(2_505, 2_505_600)
    assert april(factory["tenant-a"]).maintenance_seconds == 0


def test_sla_month_overlapping_incidents_count_once_at_the_highest_weight(factory):
    # partial 10:00-14:00 with a major 11:00-12:00 inside:
    # 1 h x 1 + 3 h x 0.3 = 3,600 + 3,240 = 6,840 s; 1 - 6,840 / 2,592,000 = 7,181/7,200
    outage(at(10, 10), 4 * 3600, impact="partial_outage", deployments=[factory["llama"]])
    outage(at(10, 11), 3600, deployments=[factory["llama"]])

    figures = april(factory["tenant-a"])

    assert figures.downtime_seconds == 6_840
    assert figures.uptime == Fraction(7_181, 7_200)


def test_sla_month_overlapping_incidents_on_two_deployments_are_not_double_counted(factory):
    # tenant-c used both: llama down 10:00-11:00 and qwen down 10:30-11:30 make 1.5 h
    outage(at(10, 10), 3600, deployments=[factory["llama"]])
    outage(at(10, 10, 30), 3600, deployments=[factory["qwen"]])

    assert april(factory["tenant-c"]).downtime_seconds == 5_400
    assert april(factory["tenant-a"]).downtime_seconds == 3_600
    assert april(factory["tenant-b"]).downtime_seconds == 3_600


def test_incident_naming_one_deployment_touches_only_its_tenants(factory):
    incident = outage(at(12), 600, deployments=[factory["llama"]])

    touched = {f.tenant.slug: f.incidents for f in sla_month_list(month_start=APRIL, now=AFTER)}

    assert touched == {"tenant-a": (incident,), "tenant-b": (), "tenant-c": (incident,)}


def test_incident_scope_rules_of_kpis_3b(factory):
    everyone = outage(at(12), 60)  # no deployment, no tenant: every tenant
    only_b = outage(at(13), 60, tenants=[factory["tenant-b"]])
    # names tenant-a, but a deployment tenant-a did not use: kpis.md 3b says no
    a_on_qwen = outage(at(14), 60, tenants=[factory["tenant-a"]], deployments=[factory["qwen"]])
    on_pool = outage(at(15), 60, pools=[factory["qwen"].pool])

    touched = {f.tenant.slug: f.incidents for f in sla_month_list(month_start=APRIL, now=AFTER)}

    assert touched["tenant-a"] == (everyone,)
    assert touched["tenant-b"] == (everyone, only_b, on_pool)
    assert touched["tenant-c"] == (everyone, on_pool)
    assert a_on_qwen not in sum(touched.values(), ())


def test_incident_touches_only_deployments_used_that_month(factory):
    # tenant-a used qwen in March only; an April incident on qwen does not touch it
    use(factory["tenant-a"], factory["qwen"], datetime(2026, 3, 30, 10, tzinfo=UTC))
    outage(at(12), 600, deployments=[factory["qwen"]])

    assert april(factory["tenant-a"]).uptime == 1
    assert april(factory["tenant-a"]).deployments_used == {"llama-70b@h100-a"}


def test_sla_month_to_date_counts_the_elapsed_time_and_ongoing_incidents(factory):
    # now Apr 11 00:00: M = 10 days = 864,000 s; major since Apr 10 23:00, unresolved:
    # 1 - 3,600 / 864,000 = 239/240
    incident_create(
        title="Down",
        severity="sev1",
        impact="major_outage",
        started_at=at(10, 23),
        deployments=[factory["llama"]],
        by=None,
        now=at(10, 23),
    )

    figures = april(factory["tenant-a"], now=at(11))

    assert figures.is_month_to_date
    assert figures.period_end == at(11)
    assert figures.month_seconds == 864_000
    assert figures.uptime == Fraction(239, 240)


def test_sla_month_incident_spanning_two_months_counts_its_part(factory):
    # major from Mar 31 23:00 to Apr 1 00:30: 1,800 s in April
    incident_create(
        title="Across the month",
        severity="sev1",
        impact="major_outage",
        started_at=datetime(2026, 3, 31, 23, tzinfo=UTC),
        resolved_at=at(1, 0, 30),
        deployments=[factory["llama"]],
        by=None,
        now=AFTER,
    )

    assert april(factory["tenant-a"]).downtime_seconds == 1_800


def test_sla_month_slo_attainment_and_sla_delivery_from_rollups(factory):
    # llama: r_ref 1000, w_in 0.5 until Apr 15; r_ref 2000, w_in 0 from then on.
    # Apr 2 10:00 (fixture): 1 request, 100 output: std 0.1, compliant 0.1
    # Apr 3: 10 requests (2 errors, 1 slow), 1,000 output, 400 input of which 100 cached:
    #   std = (1,000 + 0.5 x 300) / 1,000 = 1.15; compliant 700 output, 300 input, 100
    #   cached: (700 + 0.5 x 200) / 1,000 = 0.8
    # Apr 20 (new version): 5 requests, all compliant, 2,000 output, 600 input: 2,000 / 2,000 = 1
    llama = factory["llama"]
    deployment_version_add(
        deployment=llama,
        effective_from=at(15),
        spec=VersionSpec(r_ref=Decimal(2000), w_in=Decimal(0), slo_ttft_ms=2000),
        by=None,
    )
    use(
        factory["tenant-a"],
        llama,
        at(3, 9),
        requests=10,
        errors=2,
        compliant_requests=7,
        output_tokens=1_000,
        input_tokens=400,
        cached_tokens=100,
        compliant_output_tokens=700,
        compliant_input_tokens=300,
        compliant_cached_tokens=100,
    )
    use(
        factory["tenant-a"],
        llama,
        at(20, 9),
        requests=5,
        compliant_requests=5,
        output_tokens=2_000,
        input_tokens=600,
        compliant_output_tokens=2_000,
        compliant_input_tokens=600,
    )

    figures = april(factory["tenant-a"])

    assert (figures.requests, figures.compliant_requests) == (16, 13)
    assert figures.slo_attainment == Fraction(13, 16)
    # the fixture's row has no compliant tokens: σ = (0 + 0.8 + 1) / (0.1 + 1.15 + 1)
    assert figures.std_gpu_seconds == Fraction(1, 10) + Fraction(115, 100) + 1
    assert figures.compliant_std_gpu_seconds == Fraction(8, 10) + 1
    assert figures.sla_delivery == Fraction(18, 10) / Fraction(225, 100)  # = 4/5
    assert figures.sla_delivery == Fraction(4, 5)


def test_sla_month_slo_attainment_from_events_counts_errors_as_misses(factory):
    # through ingestion and the rollup: SLO TTFT 2,000 ms, TPOT 50 ms on llama (w_in 0.5)
    tenant = Tenant.objects.create(slug="tenant-d", name="D")
    base = {"tenant": "tenant-d", "model": "llama-70b", "time": "2026-04-07T10:15:00Z"}
    items = [
        {**base, "id": "ok", "input_tokens": 0, "output_tokens": 100, "ttft_ms": 500},
        {**base, "id": "slow", "input_tokens": 0, "output_tokens": 100, "ttft_ms": 2500},
        {**base, "id": "no-latency", "input_tokens": 200, "output_tokens": 100},
        {**base, "id": "failed", "input_tokens": 0, "output_tokens": 100, "status": "error"},
    ]
    events, errors = validate_events(items=items, now=AFTER)
    assert not errors
    usage_ingest(events=events, received_at=AFTER)
    usage_fold()

    figures = april(tenant)

    # compliant: "ok" and "no-latency" (a missing figure is met): 2 of 4
    assert figures.slo_attainment == Fraction(1, 2)
    # std: 100 + 100 + (100 + 0.5 x 200) + 100 = 500 / 1,000; compliant: 100 + 200 = 300
    assert figures.sla_delivery == Fraction(3, 5)
    assert figures.deployments_used == {"llama-70b@h100-a"}


def test_sla_month_ratios_are_null_without_requests_or_serviceable_time(factory):
    idle = Tenant.objects.create(slug="idle", name="Idle")
    maintenance_window_create(
        title="All month", starts_at=APRIL, ends_at=MAY, by=None, now=at(1) - timedelta(days=3)
    )

    figures = april(idle)

    assert (figures.requests, figures.slo_attainment, figures.sla_delivery) == (0, None, None)
    assert figures.uptime is None  # M - W = 0


def test_sla_month_list_for_a_member_holds_only_their_tenant(factory, make_user):
    member = make_user("tenant", tenant=factory["tenant-b"])

    rows = sla_month_list(month_start=APRIL, user=member, now=AFTER)

    assert [r.tenant.slug for r in rows] == ["tenant-b"]


def test_sla_month_list_needs_a_month_start(factory):
    with pytest.raises(ValueError, match="month_start"):
        sla_month_list(month_start=at(2), now=AFTER)


def test_sla_month_list_queries_do_not_grow_with_tenants(factory, django_assert_max_num_queries):
    outage(at(12), 600, deployments=[factory["llama"]])
    for n in range(10):
        tenant = Tenant.objects.create(slug=f"more-{n}", name=f"More {n}")
        use(tenant, factory["qwen"], at(4, n))

    with django_assert_max_num_queries(13):
        rows = sla_month_list(month_start=APRIL, now=AFTER)

    assert len(rows) == 13


def test_a_tenants_deployment_slo_target_is_weighted_by_its_requests(factory):
    """tenant-c: 300 requests on llama (0.99, the default), 1 on qwen on the 2nd (0.99)
    and 100 on qwen on the 12th, under its version from the 10th that promises 0.95;
    tenant-a, on llama alone: 0.99."""
    deployment_version_add(
        deployment=factory["qwen"],
        spec=VersionSpec(r_ref=Decimal(2000), w_in=Decimal(0), slo_target=Decimal("0.95")),
        effective_from=at(10),
        by=None,
    )
    use(factory["tenant-c"], factory["llama"], at(3, 10), requests=299, compliant_requests=299)
    use(factory["tenant-c"], factory["qwen"], at(12, 10), requests=100, compliant_requests=90)

    rows = {s.tenant.slug: s for s in sla_month_list(month_start=APRIL, now=AFTER)}

    # (300 × 0.99 + 1 × 0.99 + 100 × 0.95) / 401
    assert rows["tenant-c"].deployment_slo_target == Fraction(300 * 99 + 99 + 100 * 95, 401 * 100)
    assert rows["tenant-a"].deployment_slo_target == Fraction(99, 100)
