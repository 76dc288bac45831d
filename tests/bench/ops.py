"""Operations the benchmark runs inside Django, in an agent process bound to one database
(tests/bench/agent.py). Each returns JSON-able figures; timings are wall-clock seconds of
the operation alone."""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import statistics
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.db.models import Exists, OuterRef, Sum
from django.test.utils import CaptureQueriesContext

from billing.models import (
    Contract,
    Price,
    PromotionalCredit,
    RatedTenantMonth,
    RatedUsage,
    RatingPending,
    Reservation,
)
from billing.services.rating import rated_usage_update
from billing.services.reservations import reservation_cancel, reservation_create, reservation_raise
from flywheel.selectors.measurement import FactoryData
from flywheel.services.kpis import snapshots_measure
from metering.domain.usage.validation import validate_events
from metering.models import (
    CapacitySample,
    DailyUsage,
    Deployment,
    EventKey,
    FoldPending,
    HourlyUsage,
    Pool,
    ServedModel,
    UsageEvent,
)
from metering.services.factory import VersionSpec, deployment_create
from metering.services.usage.changes import usage_refold
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import refold_apply, usage_fold
from metering.services.usage.store import usage_partitions_ensure
from portal import clock
from portal.models import Project, Role, Tenant
from portal.projects import project_create
from portal.services import token_create, user_ensure
from tests.bench import config
from tests.bench.counters import counters_step_timed, factory_build
from tests.bench.events import (
    EventGenerator,
    deployment_specs,
    expected_tokens_per_event,
    project_slug,
    tenant_slug,
)

EPOCH = datetime(2026, 1, 1, tzinfo=config.MONTH_START.tzinfo)
B = 1_000_000_000


def _parse(moment: str) -> datetime:
    return datetime.fromisoformat(moment)


def _browser_session(user) -> SessionStore:
    """A logged-in browser session of `user`, valid for a week (the bench's cookie)."""
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.set_expiry(7 * 24 * 3600)
    session.create()
    return session


def _reservations(*, tenants: list, generator: EventGenerator) -> None:
    """config.RESERVATIONS of the paid tenants (the largest first), made through billing's
    services as the API would with the clock at the month's start: each on the tenant's
    favourite deployment (every other one its second), 1 to 4 GPUs at 2.50 per GPU-hour,
    terms none, 1m, 6m and 12m in turn, starting on the month's start or 7 or 14 days before
    it (a 1m term from before ends mid-month); a third raised by 2 GPUs on the 15th, and a
    none reservation in eight (the largest tenant's first) cancelled 1 s into the 20th's
    busiest hour, so that hour's capacity is spent by its first events, the one crossing it
    split and the rest on demand (kpis.md 3d)."""
    specs = deployment_specs()
    deployments = {d.slug: d for d in Deployment.objects.all()}
    clock.clock_set(config.MONTH_START)
    try:
        for index, tenant in enumerate(tenants[: config.RESERVATIONS]):
            favourites = generator.deployment_ids[int(tenant.slug.rsplit("-", 1)[1])]
            model, pool = specs[favourites[index % 2]]
            gpus = 1 + index % 4
            reservation = reservation_create(
                tenant=tenant,
                deployment=deployments[f"{model}@{pool}"],
                gpus=gpus,
                hourly_rate=Decimal("2.50"),
                term=("none", "1m", "6m", "12m")[index % 4],
                starts_at=config.MONTH_START - timedelta(days=7 * (index % 3)),
            )
            if index % 3 == 0:
                at = config.MONTH_START + timedelta(days=14, hours=index % 24)
                reservation_raise(reservation=reservation, gpus=gpus + 2, effective_from=at)
            if index % 8 == 0:
                at = config.MONTH_START + timedelta(days=19, hours=16, seconds=1)
                reservation_cancel(reservation=reservation, at=at)
    finally:
        clock.clock_set(None)


def setup(*, events: int) -> dict:
    """The factory: pools, models, deployments, tenants (most paid, with allowances and tiers
    sized to the data), prices, a promotion, capacity every 15 minutes, an operator with an
    API token and a browser session. `events` is the dataset size (for the allowances)."""
    for slug, gpu_type, gpus in config.POOLS:
        Pool.objects.create(slug=slug, name=slug, gpu_type=gpu_type, gpu_count=gpus)
    pools = {p.slug: p for p in Pool.objects.all()}
    for slug, pool_slugs, r_ref, ttft, tpot, prices in config.MODELS:
        model = ServedModel.objects.create(slug=slug, name=slug)
        for pool_slug in pool_slugs:
            deployment_create(
                slug=f"{slug}@{pool_slug}",
                model=model,
                pool=pools[pool_slug],
                by=None,
                spec=VersionSpec(r_ref=Decimal(r_ref), slo_ttft_ms=ttft, slo_tpot_ms=tpot),
            )
        Price.objects.bulk_create(
            Price(
                model=model,
                token_class=token_class,
                per_million=Decimal(per_million),
                currency="USD",
                effective_from=EPOCH,
            )
            for token_class, per_million in zip(
                ("input", "cached_input", "output"), prices, strict=True
            )
        )
    Tenant.objects.bulk_create(
        Tenant(slug=tenant_slug(rank), name=f"Tenant {rank}") for rank in range(config.TENANTS)
    )
    tenants = {t.slug: t for t in Tenant.objects.all()}
    # A tenant's monthly tokens ≈ its Zipf share × all tokens: allowances and tiers are set
    # so that most paid tenants run out of their allowance inside the month.
    generator = EventGenerator()
    month_tokens = events * expected_tokens_per_event()
    total_weight = generator.tenant_cum[-1]
    contracts = []
    for rank in range(config.TENANTS):
        share = (1 / (rank + 1) ** config.TENANT_ZIPF) / total_weight
        kind = ("paid", "paid", "paid", "paid", "paid", "paid", "trial", "paid", "internal", None)[
            rank % 10
        ]
        if kind is None:
            continue  # no contract: unsold (reason no_contract)
        tiers = []
        free = 0
        discount = Decimal(0)
        if kind == "paid":
            if rank < 10:  # large accounts: deep discount, a volume tier
                discount = Decimal(40 - 2 * rank)
                tiers = [{"from_tokens": int(share * month_tokens * 0.6), "discount_pct": "5"}]
            else:
                free = int(share * month_tokens * 0.3)
        contracts.append(
            Contract(
                tenant=tenants[tenant_slug(rank)],
                kind=kind,
                discount_pct=discount,
                free_tokens_per_month=free,
                volume_tiers=tiers,
                currency="USD",
                effective_from=EPOCH,
            )
        )
    Contract.objects.bulk_create(contracts)
    _reservations(tenants=[c.tenant for c in contracts if c.kind == "paid"], generator=generator)
    PromotionalCredit.objects.create(
        tenant=tenants[tenant_slug(11)],
        amount=Decimal("500.00"),
        currency="USD",
        effective_from=EPOCH,
        expires_at=config.MONTH_START + timedelta(days=12, minutes=30),
        description="bench credit",
    )
    samples = []
    for pool_slug, _, gpus in config.POOLS:
        moment = config.MONTH_START - timedelta(hours=1)
        while moment < config.INGEST_START + timedelta(days=config.INGEST_DAYS):
            busy_share = 0.55 * config._diurnal(moment.hour) / 1.6 + 0.2
            healthy = gpus - (gpus * 3 // 100)
            samples.append(
                CapacitySample(
                    pool=pools[pool_slug],
                    time=moment,
                    interval_s=900,
                    gpus_installed=gpus,
                    gpus_healthy=healthy,
                    gpus_busy=min(healthy, int(healthy * busy_share)),
                )
            )
            moment += timedelta(minutes=15)
    CapacitySample.objects.bulk_create(samples, batch_size=2000)
    operator = user_ensure(
        username="bench-operator", role=Role.OPERATOR, password="bench-pw-123456"
    )
    _, token = token_create(user=operator, name="bench", scopes=["ingest", "read"])
    for rank in range(config.TENANTS):  # the bulk load spreads the events over them
        for number in range(1, config.PROJECTS + 1):
            project_create(
                tenant=tenants[tenant_slug(rank)],
                slug=project_slug(number),
                name=f"Project {number}",
                cost_center=f"CC-{rank:03d}-{number:02d}",
                by=operator,
            )
    session = _browser_session(operator)
    # A browser session of every other role (the pages goal opens each role's pages).
    sessions = {Role.OPERATOR: session.session_key}
    for role, tenant in ((Role.FINANCE, None), (Role.INVESTOR, None),
                         (Role.TENANT, tenants[tenant_slug(0)])):  # fmt: skip
        user = user_ensure(
            username=f"bench-{role}", role=role, tenant=tenant, password="bench-pw-123456"
        )
        sessions[role] = _browser_session(user).session_key
    if connection.vendor == "postgresql":  # the dataset month is bulk-loaded
        usage_partitions_ensure(times=[config.INGEST_START])
    by_spec = {
        (d.model.slug, d.pool.slug): d.pk
        for d in Deployment.objects.select_related("model", "pool")
    }
    return {
        "tenants": [tenants[tenant_slug(r)].pk for r in range(config.TENANTS)],
        "deployments": [by_spec[spec] for spec in deployment_specs()],
        "token": token,
        "session": session.session_key,
        "sessions": sessions,
    }


def role_pages() -> dict[str, list[str]]:
    """Every page of each role's navigation (the API docs are not a page of the portal)."""
    from portal.shell import nav_for

    return {
        role: [item["url"] for item in nav_for(role) if item["url"] != "/api/docs/"]
        for role in (Role.OPERATOR, Role.FINANCE, Role.INVESTOR, Role.TENANT)
    }


def counts() -> dict:
    return {
        "events": UsageEvent.objects.count(),
        "keys": EventKey.objects.count(),
        "hourly_rows": HourlyUsage.objects.count(),
        "daily_rows": DailyUsage.objects.count(),
        "pending": FoldPending.objects.count(),
    }


def full_rollup() -> dict:
    """The explicit rebuild (manage.py refold): every rollup folded again from raw events."""
    started = time.perf_counter()
    usage_refold(start=datetime(2000, 1, 1, tzinfo=UTC))
    cells = refold_apply()
    return {"seconds": time.perf_counter() - started, "cells": cells}


def _ingest_hour(*, seq0: int, hour: str, per_hour: int) -> None:
    """Ingest `per_hour` generated events of the hour starting at `hour` (usage_ingest, 1,000
    per call: it writes the pending queue), untimed."""
    start = _parse(hour)
    generator = EventGenerator()
    rows = list(generator.rows(seq0=seq0, count=per_hour, start=start, days=1, hours=1))
    items = [generator.item(r) for r in rows]
    now = clock.now()
    for i in range(0, len(items), 1000):
        events, errors = validate_events(items=items[i : i + 1000], now=now)
        assert not errors, errors[:3]
        usage_ingest(events=events, received_at=now)


def incremental_rollup(*, seq0: int, hour: str, per_hour: int) -> dict:
    """Ingest one hour of new events (usage_ingest, 1,000 per call: it writes the pending
    queue), then time usage_fold(), which folds them into the hourly and daily rows."""
    _ingest_hour(seq0=seq0, hour=hour, per_hour=per_hour)
    pending = FoldPending.objects.count()
    vacuums_before = autovacuums()
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        cells = usage_fold()
        seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "cells": cells,
        "pending_rows": pending,
        "queries": len(queries),
        "autovacuum": {"start": vacuums_before, "end": autovacuums()},
    }


def autovacuums() -> list[str]:
    """What PostgreSQL's autovacuum workers are doing now ("autovacuum: VACUUM ANALYZE
    public.metering_hourlyusage", ...), sorted; none on SQLite."""
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT query FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' "
            "ORDER BY query"
        )
        return [query for (query,) in cursor.fetchall()]


def rating_after_hour(*, seq0: int, hour: str, per_hour: int, profile: bool = False) -> dict:
    """One busy hour's new events in the month's last hour (ingested and folded, untimed),
    then the rate stage timed (and profiled): it rates the tenant-months they changed from
    that hour."""
    _ingest_hour(seq0=seq0, hour=hour, per_hour=per_hour)
    usage_fold()
    return _rating_timed(profile=profile)


def rating_whole_month(*, month: str, at: str | None = None) -> dict:
    """The rate stage timed rating every tenant-month of the month from its
    start (what a price from the month's start asks for); with `at`, the portal's clock
    there (the months a reservation bills without usage are those up to its month)."""
    RatingPending.objects.create(tenant=None, start=_parse(month))
    clock.clock_set(_parse(at) if at else None)
    try:
        return _rating_timed(profile=False)
    finally:
        clock.clock_set(None)


def rating_reservations(*, month: str) -> dict:
    """What the month's rating made of the reservations (untimed): reservation fees billed,
    covered rows and tokens, and the overage (paid usage on demand in an hour a reservation
    of its tenant and deployment covered)."""
    rows = RatedUsage.objects.filter(month_start=_parse(month), sale=RatedUsage.Sale.PAID)
    covered = rows.filter(covered=True)
    same_hour = covered.filter(
        tenant=OuterRef("tenant"), deployment=OuterRef("deployment"), hour=OuterRef("hour")
    )
    overage = rows.filter(covered=False).filter(Exists(same_hour))
    tokens = Sum("output_tokens")
    return {
        "reservations": Reservation.objects.count(),
        "reserved_amount": RatedTenantMonth.objects.filter(month_start=_parse(month)).aggregate(
            total=Sum("reserved_amount")
        )["total"],
        "covered_rows": covered.count(),
        "covered_output_tokens": covered.aggregate(total=tokens)["total"],
        "overage_rows": overage.count(),
        "overage_output_tokens": overage.aggregate(total=tokens)["total"],
    }


def _rating_timed(*, profile: bool) -> dict:
    profiler = cProfile.Profile() if profile else None
    started = time.perf_counter()
    if profiler:
        profiler.enable()
    rated = rated_usage_update()
    if profiler:
        profiler.disable()
    figures = {"seconds": time.perf_counter() - started, "tenant_months": rated}
    if profiler:
        figures["profile"] = _profile_text(profiler, limit=40)
    return figures


def measure(*, start: str, end: str) -> dict:
    """What the measure job does once the days are over: a snapshot per scope, day and
    month (the pages read the factory's day snapshots)."""
    started = time.perf_counter()
    rows = snapshots_measure(start=_parse(start), end=_parse(end))
    return {"seconds": time.perf_counter() - started, "snapshots": len(rows)}


def kpis(*, start: str, end: str, profile: bool = False) -> dict:
    """FactoryData(...).kpis(...) of the factory over [start, end), measured from the rollups
    and the rating as the measure job does (no day snapshot read): time and query count."""
    period_start, period_end = _parse(start), _parse(end)
    profiler = cProfile.Profile() if profile else None
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        data = FactoryData(start=period_start, end=period_end, snapshots=False)
        result = data.kpis(scope="factory", start=period_start, end=period_end)
        if profiler:
            profiler.disable()
        seconds = time.perf_counter() - started
    figures = {
        "seconds": seconds,
        "queries": len(queries),
        "tef": str(result.tef) if result.tef is not None else None,
        "tfi": str(result.tfi) if result.tfi is not None else None,
        "output_tokens": result.output_tokens,
    }
    if profiler:
        figures["profile"] = _profile_text(profiler)
    return figures


def profile_ingest(*, seq0: int, batches: int, token: str) -> dict:
    """cProfile of whole `POST /api/v1/usage/events` requests served in-process (the Django
    test client: middleware, authentication, decoding, validation, storage), on fresh
    events, to explain where ingestion time goes."""
    import msgspec
    from django.test import Client

    generator = EventGenerator()
    start = config.INGEST_START + timedelta(days=20)  # a live feed: one hour, in time order
    rows = sorted(
        generator.rows(seq0=seq0, count=batches * 1000, start=start, days=1, hours=1),
        key=lambda r: r.time,
    )
    bodies = [
        msgspec.json.encode([generator.item(r) for r in rows[i : i + 1000]])
        for i in range(0, len(rows), 1000)
    ]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_HOST="127.0.0.1")
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for body in bodies:
        response = client.post("/api/v1/usage/events", body, content_type="application/json")
        assert response.status_code == 200, response.content[:500]
    profiler.disable()
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "events": batches * 1000, "profile": _profile_text(profiler)}


def profile_read(*, path: str, token: str) -> dict:
    """cProfile of one API read served in-process (the Django test client, no server), to
    show where a slow read spends its time."""
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_HOST="127.0.0.1")
    median = _median_served(client, path)
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    response = client.get(path)
    profiler.disable()
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "median": median,
        "status": response.status_code,
        "profile": _profile_text(profiler),
    }


def profile_page(*, path: str, username: str = "bench-operator") -> dict:
    """cProfile of one page served in-process to a signed-in user, with its queries."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(get_user_model().objects.get(username=username))
    median = _median_served(client, path)
    profiler = cProfile.Profile()
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        profiler.enable()
        response = client.get(path)
        profiler.disable()
        seconds = time.perf_counter() - started
    slowest = sorted(queries.captured_queries, key=lambda q: -float(q["time"]))[:8]
    text = "\n".join(f"{q['time']} s  {q['sql'][:300]}" for q in slowest)
    return {
        "seconds": seconds,
        "median": median,
        "status": response.status_code,
        "queries": len(queries),
        "profile": f"{len(queries)} queries; the slowest:\n{text}\n\n{_profile_text(profiler)}",
    }


def _median_served(client, path: str, times: int = 9) -> float:
    """The median time of serving `path` in-process, without the profiler, after a warm-up."""
    assert client.get(path).status_code == 200, path  # warm
    served = []
    for _ in range(times):
        started = time.perf_counter()
        client.get(path)
        served.append(time.perf_counter() - started)
    return statistics.median(served)


def _profile_text(profiler: cProfile.Profile, limit: int = 25) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(limit)
    out.write("\n--- by own time ---\n")
    stats.sort_stats("tottime").print_stats(limit)
    return out.getvalue()


# --- goal 13: webhook delivery under a burst -------------------------------------------


def hooks_setup(*, urls: list[str]) -> dict:
    """Factory endpoints at `urls` (every event type) and an operator's browser session."""
    from portal.models import WebhookEndpoint
    from portal.webhooks import secret_new

    endpoints = [WebhookEndpoint.objects.create(url=url, secret=secret_new()) for url in urls]
    operator = user_ensure(username="bench-hooks", role=Role.OPERATOR, password="bench-pw-123456")
    session = _browser_session(operator)
    return {"endpoints": [e.pk for e in endpoints], "session": session.session_key}


def raise_events(*, count: int, batch: int) -> dict:
    """`count` invoice.issued events for the factory, `batch` to a transaction, as fast as
    they can be raised (each asks for the deliver job when it commits). A burst of events
    comes from a job (the close issuing invoices, the overdue run): this process runs at a
    worker's priority, as that job would."""
    from django.db import transaction

    from portal.celery import worker_priority
    from portal.events import event_raise

    worker_priority()
    started = time.perf_counter()
    for first in range(0, count, batch):
        with transaction.atomic():
            for n in range(first, min(count, first + batch)):
                event_raise(
                    type="invoice.issued",
                    summary=f"Invoice INV-2026-{n:06d} issued: 12.50 USD",
                    data={"number": f"INV-2026-{n:06d}", "total": "12.50"},
                )
    return {"seconds": time.perf_counter() - started}


def delivery_figures(*, endpoint_ids: list[int]) -> dict:
    """For the deliveries to `endpoint_ids`: how many were delivered, and the seconds from
    each event's creation to its successful attempt."""
    from portal.models import Delivery

    rows = Delivery.objects.filter(endpoint_id__in=endpoint_ids, state="delivered").values_list(
        "event__created_at", "delivered_at"
    )
    waits = sorted((done - made).total_seconds() for made, done in rows)
    total = Delivery.objects.filter(endpoint_id__in=endpoint_ids).count()
    return {"delivered": len(waits), "total": total, "waits": waits}


# -- alerts (goal 14) --------------------------------------------------------------------

ALERTS_AT = config.BUDGET_AT  # the dataset month's last minute


def _budget_rows(tenant: Tenant, project: str | None = None) -> int:
    """The rated usage rows the budget read of `tenant` (of its `project`) sums at
    config.BUDGET_AT: its month's."""
    rows = RatedUsage.objects.filter(tenant=tenant, month_start=config.MONTH_START)
    if project is not None:
        rows = rows.filter(project_id=Project.objects.get(tenant=tenant, slug=project).pk)
    return rows.count()


def _largest_member() -> tuple[Tenant, object]:
    """The largest tenant and its member `bench-member` (the budget reads' reader)."""
    tenant = Tenant.objects.get(slug=tenant_slug(0))
    member = user_ensure(
        username="bench-member", role=Role.TENANT, tenant=tenant, password="bench-pw-123456"
    )
    return tenant, member


def alerts_prepare() -> dict:
    """The 5-minute buckets of the dataset month's last 8 days (the fold writes them within
    8 days of now: the month is folded again with the clock at its end), the month rated,
    and a tenant member's read token for the budget read."""
    from billing.services.rating import rated_usage_update

    clock.clock_set(config.MONTH_END)
    try:
        started = time.perf_counter()
        usage_refold(start=config.MONTH_END - timedelta(days=8))
        refold_apply()
        refolded = time.perf_counter() - started
        started = time.perf_counter()
        rated_usage_update()
        rated = time.perf_counter() - started
    finally:
        clock.clock_set(None)
    from metering.models import FiveMinuteUsage

    tenant, member = _largest_member()
    _, token = token_create(user=member, name="bench", scopes=["read"])
    return {
        "refold_seconds": refolded,
        "rate_seconds": rated,
        "five_minute_rows": FiveMinuteUsage.objects.count(),
        "tenant": tenant.slug,
        "budget_rows": _budget_rows(tenant),
        "tenant_rows": _budget_rows(tenant),
        "token": token,
    }


def alerts_rules(*, tenants: int) -> dict:
    """Rules for the first `tenants` tenants (a money budget, an SLO burn, uptime below
    tier each) and the factory's rules of every other kind, once."""
    from django.contrib.auth.models import User

    from portal.alerts import rule_create
    from portal.models import AlertRule

    operator = User.objects.get(username="bench-operator")
    if not AlertRule.objects.filter(tenant__isnull=True).exists():
        for kind, params in (
            ("slo_burn", {}),
            ("reconciliation_drift", {}),
            ("source_silent", {}),
            ("scrape_down", {}),
            ("gpu_waste", {}),
            ("kpi_below_band", {"kpi": "tef", "threshold": "0.5"}),
        ):
            rule_create(kind=kind, params=params, by=operator)
    held = set(AlertRule.objects.filter(kind="budget").values_list("tenant__slug", flat=True))
    for rank in range(tenants):
        slug = tenant_slug(rank)
        if slug in held:
            continue
        tenant = Tenant.objects.get(slug=slug)
        rule_create(kind="budget", tenant=tenant, params={"amount": "5000.00"}, by=operator)
        rule_create(kind="slo_burn", tenant=tenant, by=operator)
        rule_create(kind="uptime_below_tier", tenant=tenant, by=operator)
    return {"rules": AlertRule.objects.count()}


def alerts_evaluate_timed(*, profile: bool = False) -> dict:
    """One run of the alerts job at the dataset month's last minute: seconds, queries, and
    what it fired (a first run fires; the next ones evaluate the same and fire nothing);
    with `profile`, where its time went."""
    from portal.alerts import alerts_evaluate

    clock.clock_set(ALERTS_AT)
    profiler = cProfile.Profile() if profile else None
    try:
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            if profiler:
                profiler.enable()
            counts = alerts_evaluate(now=ALERTS_AT)
            if profiler:
                profiler.disable()
            seconds = time.perf_counter() - started
    finally:
        clock.clock_set(None)
    slowest = sorted(queries.captured_queries, key=lambda q: -float(q["time"]))[:5]
    figures = {"seconds": seconds, "queries": len(queries), **counts}
    if profiler:
        figures["profile"] = _profile_text(profiler, limit=30)
        figures["slowest_queries"] = [f"{q['time']} s {q['sql'][:300]}" for q in slowest]
    return figures


# capex per GPU and power (kW) per GPU of each GPU type's cost model
GPU_COSTS = {"H100": (45_000, "1.275"), "H200": (54_000, "1.275"), "B200": (61_900, "1.79"),
             "B300": (75_000, "2.0")}  # fmt: skip


def _cost_model(pool: Pool) -> None:
    """A cost model of the pool's GPU type (GPU_COSTS) from EPOCH on, by flywheel's service."""
    from flywheel.services.tfom import cost_model_create

    capex, power = GPU_COSTS[pool.gpu_type]
    cost_model_create(pool=pool, capex_per_gpu=Decimal(capex), depreciation_months=60,
                      power_kw_per_gpu=Decimal(power), pue=Decimal("1.3"),
                      electricity_price_per_kwh=Decimal("0.083"),
                      hosting_per_gpu_month=Decimal(200), effective_from=EPOCH)  # fmt: skip


# -- projects: the budget read with ?project= (goal 14) and the chargeback (goal 26) ------


def chargeback_prepare(*, whole: bool) -> dict:
    """The dataset month rated whole with the clock at its end (the chargeback splits its
    rating so far: no invoice bills it): here when `whole`, else by the rating stage's last
    run (rating_whole_month at config.MONTH_END), and in either case what is pending since
    rated at that clock; a hard monthly token quota of the largest tenant's first project
    (thresholds 80 and 100, by a member, as a tenant manages its own), and that member's read
    token; what the month's rated usage holds per project. The pools get a cost model each
    here (the chargeback at cost needs the month's total_cost; the other stages' datasets
    have none; the rating reads none)."""
    from flywheel.models import CostModel
    from portal.alerts import rule_create
    from portal.models import AlertRule

    for pool in Pool.objects.exclude(pk__in=CostModel.objects.values("pool_id")):
        _cost_model(pool)

    if whole:
        RatingPending.objects.create(tenant=None, start=config.MONTH_START)
    clock.clock_set(config.MONTH_END)
    try:
        rated = _rating_timed(profile=False)["seconds"]
    finally:
        clock.clock_set(None)
    tenant, member = _largest_member()
    project = project_slug(1)
    quotas = AlertRule.objects.filter(kind="budget", tenant=tenant, scope__project=project)
    if not quotas.exists():
        rule_create(
            kind="budget",
            tenant=tenant,
            scope={"project": project},
            params={"tokens": 1_000_000_000, "enforce": "hard", "thresholds": [80, 100]},
            by=member,
        )
    _, token = token_create(user=member, name="bench-project", scopes=["read"])
    rows = RatedUsage.objects.filter(month_start=config.MONTH_START)
    return {
        "rate_seconds": rated,
        "projects": Project.objects.count(),
        "rated_rows": rows.count(),
        "rated_projects": rows.values("tenant_id", "project_id").distinct().count(),
        "none_output_tokens": rows.filter(project_id=0).aggregate(n=Sum("output_tokens"))["n"],
        "output_tokens": rows.aggregate(n=Sum("output_tokens"))["n"],
        "tenant": tenant.slug,
        "project": project,
        "budget_rows": _budget_rows(tenant, project),
        "tenant_rows": _budget_rows(tenant),
        "token": token,
    }


def forecast_setup(*, pools: int, models: int, days: int) -> dict:
    """The forecast job's dataset (goal 23): `pools` pools and `models` models, each served by
    one deployment, one tenant paying list prices for all; `days` closed days to yesterday
    of one hourly rollup row per deployment and day (loaded as the demo loads its past days,
    its days summed), each its own trend and weekly pattern with noise (fixed seed), rated by
    billing's rate stage."""
    import numpy as np

    from billing.services.pricing import contract_create, price_create
    from metering.models import UsageChange
    from metering.services.usage.rollup import rollup_days
    from portal.pipeline import log_append

    rng = np.random.default_rng(config.SEED)
    tenant = Tenant.objects.create(slug="forecast-tenant", name="Forecast tenant")
    contract_create(tenant=tenant, kind="paid", effective_from=EPOCH, currency="USD")
    made = [
        Pool.objects.create(slug=f"pool-{p:03d}", name=f"pool {p}", gpu_type="H100", gpu_count=64)
        for p in range(pools)
    ]
    deployments = []
    for m in range(models):
        model = ServedModel.objects.create(slug=f"model-{m:03d}", name=f"model {m}")
        for token_class, price in (("input", "0.20"), ("output", "0.80")):
            price_create(model=model, token_class=token_class, per_million=Decimal(price),
                         currency="USD", effective_from=EPOCH)  # fmt: skip
        deployments.append(
            deployment_create(slug=f"model-{m:03d}@{made[m % pools].slug}", model=model,
                              pool=made[m % pools], by=None, spec=VersionSpec(r_ref=Decimal(2000)))
        )  # fmt: skip
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)  # noqa: TID251
    first = today - timedelta(days=days)
    t = np.arange(days)
    rows, cells = [], set()
    for deployment in deployments:
        level, growth = rng.uniform(0.5, 5) * B, rng.uniform(-0.002, 0.006)
        weekly = rng.uniform(0.05, 0.3) * np.sin(2 * np.pi * (t + rng.integers(7)) / 7)
        noise = rng.normal(0, rng.uniform(0.01, 0.08), days)
        for day, factor in enumerate((1 + growth * t) * (1 + weekly) * (1 + noise)):
            hour = first + timedelta(days=day, hours=12)
            output = max(0, int(level * factor))
            rows.append(HourlyUsage(tenant=tenant, deployment=deployment, hour=hour, requests=1,
                                    output_tokens=output, ok_output_tokens=output,
                                    compliant_requests=1, compliant_output_tokens=output,
                                    is_demo=True))  # fmt: skip
            cells.add((tenant.pk, deployment.pk, hour.date()))
    HourlyUsage.objects.bulk_create(rows, batch_size=5000)
    rollup_days(cells)
    log_append(
        UsageChange,
        [UsageChange(kind=UsageChange.Kind.USAGE, tenant=tenant, pool_id=pool.pk, start=first,
                     end=today) for pool in made],
        log="metering.usage",
    )  # fmt: skip
    usage_fold()  # sets the fold's mark: every day before today is closed
    started = time.perf_counter()
    rated_usage_update()
    return {"rows": len(rows), "rating_seconds": time.perf_counter() - started}


def forecast_timed(*, profile: bool = False) -> dict:
    """One run of the forecast job's work (flywheel.services.plan.forecasts_update: read every
    series, fit and backtest each, store them), timed; and the read of the series alone."""
    from collections import Counter

    from flywheel.selectors.plan import closed_until, series_read
    from flywheel.services.plan import forecasts_update

    started = time.perf_counter()
    series = series_read(end=closed_until())
    read = time.perf_counter() - started
    profiler = cProfile.Profile() if profile else None
    load = os.getloadavg()[0]
    started, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    rows = forecasts_update()
    if profiler:
        profiler.disable()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    result = {
        "seconds": seconds,
        "cpu_seconds": cpu,  # this process's: the machine's other work left out
        "load_average": [load, os.getloadavg()[0]],  # 1-minute, before and after
        "read_seconds": read,
        "series": len(rows),
        "days": len(series[0].values) if series else 0,
        "methods": dict(Counter(row.method for row in rows)),
        "mape_median": statistics.median(r.mape for r in rows if r.mape is not None),
    }
    if profiler:
        result["profile"] = _profile_text(profiler)
    return result


def plan_setup(*, pools: int, models: int) -> dict:
    """The capacity plan's dataset (goal 25): `pools` pools of 4 GPU types with a cost model
    each, `models` models each deployed on one pool with a 50 ms TPOT SLO and a reference
    curve of 6 points on every GPU type (its own rates, fixed seed), and each model's stored
    production and revenue forecasts: 120 closed days and 90 forecast days growing 0-3% a
    week. No usage: the plan reads the forecasts, the curves and the cost models."""
    import numpy as np

    from flywheel.models import Forecast
    from metering.domain.factory import CurvePoint
    from metering.services.factory import curves_import

    rng = np.random.default_rng(config.SEED)
    names = list(GPU_COSTS)
    made = []
    for p in range(pools):
        gpu = names[p % len(names)]
        pool = Pool.objects.create(slug=f"plan-pool-{p:02d}", name=f"pool {p}", gpu_type=gpu,
                                   gpu_count=int(rng.integers(32, 512)))  # fmt: skip
        _cost_model(pool)
        made.append(pool)
    today = datetime.now(UTC).date()  # noqa: TID251
    points, forecasts = [], []
    for m in range(models):
        model = ServedModel.objects.create(slug=f"plan-model-{m:02d}", name=f"model {m}")
        deployment_create(slug=f"{model.slug}@{made[m % pools].slug}", model=model,
                          pool=made[m % pools], by=None,
                          spec=VersionSpec(r_ref=Decimal(2000), slo_tpot_ms=50))  # fmt: skip
        for t, gpu in enumerate(names):
            tp = int(rng.choice([1, 2, 4, 8]))
            top = float(rng.uniform(1500, 6000)) * (1 + 0.3 * t)
            for i, per_user in enumerate((5, 10, 20, 30, 45, 60)):
                points.append(({"index": len(points)}, CurvePoint(
                    model=model.slug, gpu_type=gpu, tp=tp, precision="fp8",
                    concurrency=2 ** (6 - i), tok_s_per_gpu=Decimal(round(top * (1 - i / 7))),
                    tok_s_per_user=Decimal(per_user), token_basis="output", isl=1000, osl=250,
                )))  # fmt: skip
        level = float(rng.uniform(0.2, 2.0)) * 86_400 * 10_000  # 2,000–20,000 tok/s a day
        growth = float(rng.uniform(0, 0.03)) / 7
        history = [level * (1 + growth * (d - 120)) for d in range(120)]
        ahead = [level * (1 + growth * d) for d in range(90)]
        for metric, scale in (("tokens", 1.0), ("revenue", 1e-6)):
            forecasts.append(Forecast(
                scope=f"model:{model.slug}", metric=metric, method="ets",
                history_start=today - timedelta(days=120), history=[v * scale for v in history],
                forecast_start=today,
                points=[[v * scale, v * scale * 0.9, v * scale * 1.1, v * scale * 0.8,
                         v * scale * 1.2] for v in ahead],
                made_at=datetime.now(UTC),  # noqa: TID251
            ))  # fmt: skip
    curves_import(points=points, by=None)
    Forecast.objects.bulk_create(forecasts)
    return {"pools": pools, "models": models, "curve_points": len(points)}


def plan_contend() -> dict:
    """The same factory with a tenth of its GPUs (at least 8 a pool): each model's cheapest
    pools no longer hold every model, so the plan solves the whole program and buys GPUs."""
    for pool in Pool.objects.filter(slug__startswith="plan-pool-"):
        pool.gpu_count = max(8, pool.gpu_count // 10)
        pool.save(update_fields=["gpu_count"])
    return {"gpus": sum(Pool.objects.filter(slug__startswith="plan-pool-").values_list(
        "gpu_count", flat=True))}  # fmt: skip


def plan_timed() -> dict:
    """One run of the capacity plan (flywheel.services.plan.capacity_plan_update: read the
    inputs, place every month of the horizon, store), timed; the largest proven gap."""
    from flywheel.services.plan import capacity_plan_update

    started, cpu = time.perf_counter(), time.process_time()
    plan = capacity_plan_update()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    months = plan.body["months"]
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "months": len(months),
        "added": sum(p["add"] for m in months for p in m["pools"]),
        "months_within_a_gap": sum(1 for m in months if any("within" in n for n in m["notes"])),
    }


# Goal 24 (GET /metrics with 1,000 tenants): its factory, and the measure stage's counters.
metrics_setup = factory_build
metrics_counters_step = counters_step_timed
