"""The worked examples of kpis.md section 7 through the HTTP API, /metrics, and snapshots."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from prometheus_client.parser import text_string_to_metric_families

from flywheel.models import KpiSnapshot
from flywheel.selectors.loop.shapes import rfc3339
from flywheel.services.kpis import snapshots_measure
from portal import clock
from portal.periods import month_start
from tests.concurrency import run_together
from tests.conftest import on_every_clock

pytestmark = pytest.mark.both_backends
WEEK = datetime(2026, 3, 2, tzinfo=UTC)


@pytest.fixture
def api(users, token_client):
    return token_client(users["operator"], scopes=["ingest", "read", "admin"])


def _post(api, path, body):
    response = api.post(path, body)
    assert response.status_code in (200, 201), (path, response.json())
    return response.json()


def _factory(api, *, pool, gpus, model="llama-70b", r_ref="1000", ttft=None):
    _post(api, "/api/v1/pools", {"slug": pool, "name": pool, "gpu_type": "H100", "gpu_count": gpus})
    _post(api, "/api/v1/models", {"slug": model, "name": model})
    body = {"model": model, "pool": pool, "slug": f"{model}@{pool}", "r_ref": r_ref}
    if ttft:
        body["slo_ttft_ms"] = ttft
    _post(api, "/api/v1/deployments", body)


def test_example_1_one_pool_one_week(api, tenant_a, django_capture_on_commit_callbacks):
    _factory(api, pool="p1", gpus=100)
    # Healthy 96 of 100 all week; busy 47 for the first 48,384 s then 46: 46.08 on average,
    # 48% of the healthy GPUs.
    _post(
        api,
        "/api/v1/capacity",
        [
            {"pool": "p1", "time": "2026-03-02T00:00:00Z", "gpus_installed": 100,
             "gpus_healthy": 96, "gpus_busy": 47},
            {"pool": "p1", "time": (WEEK + timedelta(seconds=48_384)).isoformat(),
             "gpus_installed": 100, "gpus_healthy": 96, "gpus_busy": 46},
        ],
    )  # fmt: skip
    hourly = 13_098_516_480 // 168  # 77,967,360 output tokens an hour
    events = [
        {"id": f"w{h}", "time": (WEEK + timedelta(hours=h, minutes=30)).isoformat(),
         "tenant": "tenant-a", "model": "llama-70b", "input_tokens": 0, "output_tokens": hourly}
        for h in range(168)
    ]  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        _post(api, "/api/v1/usage/events", events)

    kpis = api.get("/api/v1/kpis?scope=factory&from=2026-03-02&to=2026-03-09").json()

    assert kpis["telemetry"] == "measured"
    assert kpis["calendar_gpu_seconds"] == 60_480_000
    assert kpis["available_gpu_seconds"] == 58_060_800
    assert kpis["busy_gpu_seconds"] == 27_869_184
    assert kpis["availability"] == pytest.approx(0.96, abs=1e-12)
    assert kpis["occupancy"] == pytest.approx(0.48, abs=1e-12)
    assert kpis["efficiency"] == pytest.approx(0.47, abs=1e-12)
    assert kpis["tef"] == pytest.approx(0.216576, abs=1e-12)
    assert kpis["output_tokens"] == 13_098_516_480
    pool = api.get("/api/v1/kpis?scope=p1&from=2026-03-02&to=2026-03-09").json()
    assert pool["tef"] == kpis["tef"]


def test_example_2_no_capacity_samples(api, tenant_a, django_capture_on_commit_callbacks):
    _factory(api, pool="p700", gpus=700)
    events = [
        {
            "id": f"h{i}",
            "time": f"2026-03-02T10:{i:02d}:00Z",
            "tenant": "tenant-a",
            "model": "llama-70b",
            "input_tokens": 0,
            "output_tokens": 12_600_000,
        }
        for i in range(60)
    ]  # fmt: skip  (756,000,000 output tokens in the hour: 210,000 tokens/s)
    with django_capture_on_commit_callbacks(execute=True):
        _post(api, "/api/v1/usage/events", events)

    kpis = api.get("/api/v1/kpis?from=2026-03-02T10:00:00Z&to=2026-03-02T11:00:00Z").json()

    assert kpis["telemetry"] == "assumed"
    assert kpis["tef"] == pytest.approx(0.30, abs=1e-12)
    assert kpis["tps"] == pytest.approx(210_000)
    assert kpis["theoretical_tps"] == pytest.approx(700_000)


def test_example_4_tfi_from_its_factors(
    api, tenant_a, tenant_b, django_capture_on_commit_callbacks
):
    """TEF 0.65, σ 0.999, s 0.70, ρ 0.90 → TFI 0.4090905 on one GPU for one hour."""
    _factory(api, pool="one", gpus=1, ttft=2000)
    _post(api, "/api/v1/prices", {"model": "llama-70b", "token_class": "output",
                                  "per_million": "1.00", "currency": "USD",
                                  "effective_from": "2026-01-01T00:00:00Z"})  # fmt: skip
    _post(api, "/api/v1/contracts", {"tenant": "tenant-a", "kind": "paid", "discount_pct": "10",
                                     "effective_from": "2026-01-01T00:00:00Z"})  # fmt: skip
    _post(api, "/api/v1/contracts", {"tenant": "tenant-b", "kind": "trial",
                                     "effective_from": "2026-01-01T00:00:00Z"})  # fmt: skip
    base = {"model": "llama-70b", "input_tokens": 0, "time": "2026-03-02T10:30:00Z"}
    events = [
        {**base, "id": "paid", "tenant": "tenant-a", "output_tokens": 1_636_362, "ttft_ms": 100},
        {**base, "id": "trial", "tenant": "tenant-b", "output_tokens": 701_298, "ttft_ms": 100},
        {**base, "id": "slow", "tenant": "tenant-b", "output_tokens": 2_340, "ttft_ms": 5000},
    ]
    with django_capture_on_commit_callbacks(execute=True):
        _post(api, "/api/v1/usage/events", events)

    kpis = api.get("/api/v1/kpis?from=2026-03-02T10:00:00Z&to=2026-03-02T11:00:00Z").json()

    assert kpis["tef"] == pytest.approx(0.65, abs=1e-12)
    assert kpis["sla_delivery"] == pytest.approx(0.999, abs=1e-12)
    assert kpis["sell_through"] == pytest.approx(0.70, abs=1e-12)
    assert kpis["price_realization"] == pytest.approx(0.90, abs=1e-12)
    assert kpis["tfi"] == pytest.approx(0.4090905, abs=1e-12)
    assert (kpis["list_value"], kpis["realized_revenue"]) == ("1.64", "1.47")
    assert kpis["paid_output_tokens"] == 1_636_362


def test_unknown_scope_is_a_400_naming_the_field(api, db):
    response = api.get("/api/v1/kpis?scope=nope")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "scope"


def test_investor_reads_kpis_and_tenant_cannot(users, client, db):
    client.force_login(users["investor"])
    assert client.get("/api/v1/kpis").status_code == 200
    client.force_login(users["tenant"])
    assert client.get("/api/v1/kpis").status_code == 403
    assert client.get("/metrics").status_code == 403


@on_every_clock
def test_metrics_carry_the_same_values_as_the_api(
    now, api, users, session_client, tenant_a, django_capture_on_commit_callbacks
):
    """/metrics reads this month through the one KPI read, over the window GET /api/v1/kpis
    measures (kpis.md section 0), with an event in the hour in progress, counted up to the
    measurement (here now: it ran as the events committed): the same TEF and TFI, and no
    ratio outside [0, 1], at 00:30 on the 1st too."""
    _factory(api, pool="p1", gpus=8)
    events = [
        {"id": "m1", "time": (now - timedelta(hours=1)).isoformat(), "tenant": "tenant-a",
         "model": "llama-70b", "input_tokens": 10, "output_tokens": 1_000_000},
        {"id": "m2", "time": (now - timedelta(seconds=1)).isoformat(), "tenant": "tenant-a",
         "model": "llama-70b", "input_tokens": 10, "output_tokens": 9_000_000},
    ]  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        _post(api, "/api/v1/usage/events", events)  # folded, rated and measured (eagerly)

    text = api.get("/metrics").content.decode()
    kpis = api.get("/api/v1/kpis?period=this_month").json()

    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert kpis["empty_reason"] is None
    overview = session_client(users["operator"]).get("/?period=this_month").context["kpis"]
    for name in ("tef", "tfi", "occupancy", "sla_delivery", "sell_through"):
        gauges = {s.labels["scope"]: s.value for s in families[f"tokenfactory_{name}"].samples}
        assert gauges == {"factory": kpis[name], "p1": kpis[name]}, name
        assert overview[name] == kpis[name], name
    for name in ("availability", "occupancy", "sla_delivery", "sell_through"):
        assert 0 <= kpis[name] <= 1, name
    assert kpis["to"] == rfc3339(now)  # the hour in progress counts, as far as measured
    assert kpis["output_tokens"] == 9_000_000 + (
        1_000_000 if now - timedelta(hours=1) >= month_start(now) else 0
    )


def _snapshot_rows():
    return sorted(
        (s.scope, s.period_kind, s.period_start, s.values["tef"], s.values["output_tokens"])
        for s in KpiSnapshot.objects.all()
    )


def test_snapshots_are_upserts_and_survive_a_crash(api, tenant_a, monkeypatch):
    from metering.services.usage.rollup import usage_fold

    _factory(api, pool="p1", gpus=8)
    events = [{"id": f"s{d}", "time": f"2026-03-0{d}T12:00:00Z", "tenant": "tenant-a",
               "model": "llama-70b", "input_tokens": 0, "output_tokens": d * 1000}
              for d in range(1, 4)]  # fmt: skip
    _post(api, "/api/v1/usage/events", events)
    usage_fold()  # the fold alone: the embedded default would measure the month too
    now = datetime(2026, 3, 10, tzinfo=UTC)
    snapshots_measure(start=WEEK - timedelta(days=1), end=WEEK + timedelta(days=2), now=now)
    clean = _snapshot_rows()

    from flywheel.services import kpis as service

    def crash(*args, **kwargs):
        raise RuntimeError("worker killed")

    with monkeypatch.context() as patch:
        patch.setattr(service.KpiSnapshot.objects, "bulk_create", crash)
        with pytest.raises(RuntimeError):
            snapshots_measure(start=WEEK - timedelta(days=1), end=WEEK + timedelta(days=2), now=now)
    snapshots_measure(start=WEEK - timedelta(days=1), end=WEEK + timedelta(days=2), now=now)

    assert _snapshot_rows() == clean
    # 3 days and 1 month, for the factory and its pool.
    assert len(clean) == (3 + 1) * 2
    assert [r[4] for r in clean if r[0] == "factory" and r[1] == "day"] == [1000, 2000, 3000]


@pytest.mark.postgres_only
def test_two_workers_measuring_at_once_leave_one_row_per_key(transactional_db, users,
                                                              token_client):  # fmt: skip
    api = token_client(users["operator"], scopes=["ingest", "read", "admin"])
    _factory(api, pool="p1", gpus=8)
    now = datetime(2026, 3, 10, tzinfo=UTC)

    _, errors = run_together(
        lambda _: snapshots_measure(start=WEEK, end=WEEK + timedelta(days=3), now=now), range(2)
    )

    assert errors == []
    assert KpiSnapshot.objects.count() == (3 + 1) * 2


def test_dotted_model_and_deployment_names_round_trip(api, db):
    _factory(api, pool="h100-a", gpus=8, model="llama-3.3-70b")
    assert api.get("/api/v1/models/llama-3.3-70b").json()["slug"] == "llama-3.3-70b"
    deployment = api.get("/api/v1/deployments/llama-3.3-70b@h100-a").json()
    assert (deployment["model"], deployment["pool"]) == ("llama-3.3-70b", "h100-a")
    bad = api.post("/api/v1/models", {"slug": "bad name", "name": "x"})
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["field"] == "slug"


def test_late_usage_is_measured_again_through_the_change_logs(api, tenant_a):
    """The stages one after the other, as a worker runs them: a late event for a closed day
    is folded (metering's change log), rated (billing's change log), and the measure stage
    measures that day and its month again, and nothing else of the months before now."""
    from billing.tasks import rate_task
    from flywheel.tasks import measure_task
    from metering.tasks import fold_task

    _factory(api, pool="p1", gpus=8)
    day = {"tenant": "tenant-a", "model": "llama-70b", "input_tokens": 0}
    _post(api, "/api/v1/usage/events", [{**day, "id": "d1", "time": "2026-03-02T12:00:00Z",
                                         "output_tokens": 1000}])  # fmt: skip
    fold_task()
    rate_task()
    measure_task()
    snapshots_measure(
        start=WEEK, end=WEEK + timedelta(days=1), now=datetime(2026, 4, 2, tzinfo=UTC)
    )
    closed = KpiSnapshot.objects.get(scope="factory", period_kind="day", period_start=WEEK)
    month = KpiSnapshot.objects.get(
        scope="factory", period_kind="month", period_start=WEEK.replace(day=1)
    )
    assert (closed.is_closed, closed.values["output_tokens"]) == (True, 1000)
    assert (month.is_closed, month.values["output_tokens"]) == (True, 1000)
    measured = {s.pk: s.measured_at for s in KpiSnapshot.objects.all()}

    _post(api, "/api/v1/usage/events", [{**day, "id": "d2", "time": "2026-03-02T13:00:00Z",
                                         "output_tokens": 500}])  # fmt: skip
    fold_task()
    rate_task()
    measure_task()

    for kind, start in (("day", WEEK), ("month", WEEK.replace(day=1))):
        again = KpiSnapshot.objects.get(scope="factory", period_kind=kind, period_start=start)
        assert (again.is_closed, again.values["output_tokens"]) == (True, 1500), kind
    march = api.get("/api/v1/kpis?scope=factory&from=2026-03-01&to=2026-04-01").json()
    assert march["output_tokens"] == 1500
    # Only March (from the 2nd) was measured again, not every month from it to now.
    remeasured = {
        s.period_start.astimezone(UTC)
        for s in KpiSnapshot.objects.all()
        if s.pk in measured and s.measured_at != measured[s.pk]
    }
    assert remeasured and all(start.month == 3 for start in remeasured)


def test_a_late_event_is_measured_again_by_the_stages_its_ingest_asks_for(
    api, tenant_a, django_capture_on_commit_callbacks
):
    """The ingest asks for the fold once it commits; each stage asks for the next (eagerly
    here): the closed periods the late event changes are measured again."""
    _factory(api, pool="p1", gpus=8)
    day = {"tenant": "tenant-a", "model": "llama-70b", "input_tokens": 0}
    with django_capture_on_commit_callbacks(execute=True):
        _post(api, "/api/v1/usage/events", [{**day, "id": "d1", "output_tokens": 1000,
                                             "time": "2026-03-02T12:00:00Z"}])  # fmt: skip
    snapshots_measure(
        start=WEEK, end=WEEK + timedelta(days=1), now=datetime(2026, 4, 2, tzinfo=UTC)
    )

    with django_capture_on_commit_callbacks(execute=True):
        _post(api, "/api/v1/usage/events", [{**day, "id": "d2", "output_tokens": 500,
                                             "time": "2026-03-02T13:00:00Z"}])  # fmt: skip

    closed = KpiSnapshot.objects.get(scope="factory", period_kind="day", period_start=WEEK)
    assert (closed.is_closed, closed.values["output_tokens"]) == (True, 1500)


@pytest.mark.parametrize("now", [datetime(2026, 4, 10, tzinfo=UTC)], indirect=True)
def test_the_measure_command_measures_the_period_named_as_the_api_names_it(api, tenant_a, now):
    from django.core.management import CommandError, call_command

    _factory(api, pool="p1", gpus=8)
    _post(api, "/api/v1/usage/events", [{"id": "m1", "time": "2026-03-02T12:00:00Z",
                                         "tenant": "tenant-a", "model": "llama-70b",
                                         "input_tokens": 0, "output_tokens": 1000}])  # fmt: skip
    out = StringIO()

    call_command("measure", "--period", "2026-03", stdout=out)

    # March whole (a closed month is measured whole), factory and p1: (31 days + 1) x 2
    assert "Measured 31 days and 1 months (64 snapshots) from 2026-03-01 to 2026-04-01." in (
        out.getvalue()
    )
    march = KpiSnapshot.objects.get(
        scope="factory", period_kind="month", period_start=WEEK.replace(day=1)
    )
    assert march.values["output_tokens"] == 1000
    with pytest.raises(CommandError) as refused:
        call_command("measure", "--period", "2026-03", "--to", "2026-03-09", stdout=out)
    assert str(refused.value) == "--period: give either period or from/to, not both"


def test_a_pools_service_life_is_bounded_by_whole_hours(api):
    """Its time is measured by hourly rollups: a start or end inside an hour is refused."""
    _factory(api, pool="h100-a", gpus=8)
    for field in ("in_service_from", "retired_at"):
        refused = api.patch("/api/v1/pools/h100-a", {field: "2026-12-01T00:30:00Z"})
        assert refused.json() == {
            "errors": [
                {"field": field, "message": "must be a whole UTC hour (minutes and seconds zero)"}
            ]
        }
    assert api.get("/api/v1/pools/h100-a").json()["in_service_from"] is None


@pytest.mark.parametrize("now", [datetime(2027, 1, 1, 0, 30, tzinfo=UTC)], indirect=True)
def test_kpis_and_tfom_of_an_empty_window_are_null_with_a_reason(api, now):
    """At 00:30 on the 1st the latest measurement still ends in December (the pipeline last
    ran at 23:59:50): no second of the month is measured, nothing is counted as idle, and
    the answer says why (kpis.md section 0, empty windows)."""
    _factory(api, pool="h100-a", gpus=8)
    patched = api.patch("/api/v1/pools/h100-a", {"in_service_from": "2026-12-01T00:00:00Z"})
    assert patched.status_code == 200, patched.json()
    _measured_at(datetime(2026, 12, 31, 23, 59, 50, tzinfo=UTC), now=now)

    kpis = api.get("/api/v1/kpis?period=this_month").json()
    tfom = api.get("/api/v1/tfom?period=this_month").json()
    unknown = api.get("/api/v1/kpis?period=this_month&scope=nope")

    for body in (kpis, tfom):
        assert body["empty_reason"] == "no_usage_yet"
        assert (body["from"], body["to"]) == ("2027-01-01T00:00:00Z", "2027-01-01T00:00:00Z")
        assert body["data_until"] == "2027-01-01T00:30:00Z"
        assert body["tef"] is body["tfi"] is body["availability"] is None
    assert tfom["revenue"] is tfom["ebitda"] is tfom["roi"] is None
    assert unknown.status_code == 400
    # December, over, is measured as far as the measurement reaches: its last 10 seconds
    # wait for the pipeline.
    december = api.get("/api/v1/kpis?period=last_month").json()
    assert december["empty_reason"] is None and december["to"] == "2026-12-31T23:59:50Z"


def _measured_at(moment: datetime, *, now: datetime) -> None:
    """The pipeline's last run at `moment` (it published its cut then), the clock back at
    `now`."""
    from billing.services.rating import rated_usage_update

    clock.clock_set(moment)
    rated_usage_update()
    clock.clock_set(now)


def test_kpis_before_any_pool_is_in_service_are_null_with_a_reason(api):
    """A pool enters service with its first capacity sample or usage (kpis.md section 0):
    a period before that measures nothing, rather than idle GPUs."""
    _factory(api, pool="h100-a", gpus=8)
    _post(
        api,
        "/api/v1/capacity",
        [{"pool": "h100-a", "time": "2026-12-10T00:00:00Z", "gpus_installed": 8,
          "gpus_healthy": 8, "gpus_busy": 4}],
    )  # fmt: skip

    november = api.get("/api/v1/kpis?period=2026-11").json()
    december = api.get("/api/v1/kpis?period=this_month").json()

    assert (november["empty_reason"], november["tef"], november["calendar_gpu_seconds"]) == (
        "no_pool_in_service",
        None,
        None,
    )
    # In service from 10 December 00:00 to now (16 December 10:00): 154 hours of 8 GPUs.
    assert december["empty_reason"] is None
    assert december["calendar_gpu_seconds"] == 154 * 3600 * 8
    assert api.get("/api/v1/pools/h100-a").json()["in_service_from"] == "2026-12-10T00:00:00Z"


def test_a_fold_that_stopped_reads_as_a_lag_not_as_idle_gpus(
    api, users, client, tenant_a, now, django_capture_on_commit_callbacks
):
    """Usage folded until 10:00, then metering stopped (no fold for two hours): the window
    ends at 10:00, the hours since are not counted as idle GPUs, and the page says how far
    usage is metered (kpis.md section 0, data_until)."""
    _factory(api, pool="p1", gpus=8)
    events = [
        {"id": f"e{h}", "time": (now - timedelta(hours=h, minutes=-20)).isoformat(),
         "tenant": "tenant-a", "model": "llama-70b", "input_tokens": 0, "output_tokens": 7_200}
        for h in range(1, 4)
    ]  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        _post(api, "/api/v1/usage/events", events)  # folded on commit, at 10:00
    folded = api.get("/api/v1/kpis?period=this_month").json()

    clock.clock_set(now + timedelta(hours=2, minutes=5))
    lagging = api.get("/api/v1/kpis?period=this_month").json()

    assert lagging["data_until"] == "2026-12-16T10:00:00Z"
    assert lagging["to"] == "2026-12-16T10:00:00Z"
    assert lagging["tef"] == folded["tef"] > 0  # not diluted by two unmetered hours
    assert lagging["calendar_gpu_seconds"] == folded["calendar_gpu_seconds"]
    client.force_login(users["operator"])
    page = client.get("/?period=this_month").content.decode()
    assert "usage metered until 2026-12-16 10:00 UTC" in page


@pytest.mark.parametrize("now", [datetime(2027, 1, 1, 0, 30, tzinfo=UTC)], indirect=True)
def test_an_empty_window_says_not_enough_data_on_every_page_and_in_the_flywheel(
    api, users, client, now
):
    """At 00:30 on the 1st nothing of "this month" is measured yet (the pipeline last ran at
    23:59:50): the pages say so in words, the diagnosis names no bottleneck and a scenario
    is refused, instead of 0% and a loss."""
    _factory(api, pool="h100-a", gpus=8)
    api.patch("/api/v1/pools/h100-a", {"in_service_from": "2026-12-01T00:00:00Z"})
    _measured_at(datetime(2026, 12, 31, 23, 59, 50, tzinfo=UTC), now=now)

    diagnosis = api.get("/api/v1/flywheel/diagnosis?period=this_month").json()
    scenario = api.post("/api/v1/flywheel/scenarios", {})

    assert diagnosis["empty_reason"] == "no_usage_yet"
    assert diagnosis["bottleneck"] is None and diagnosis["factors"] == []
    assert scenario.status_code == 400
    assert scenario.json()["errors"][0]["field"] == "from"
    assert "not enough data" in scenario.json()["errors"][0]["message"]
    for role, path in (("operator", "/"), ("investor", "/investor/"), ("operator", "/flywheel/")):
        client.force_login(users[role])
        page = client.get(f"{path}?period=this_month").content.decode()
        assert "Not enough data for this period." in page, path
        assert 'data-empty-reason="no_usage_yet"' in page, path
        assert 'id="bottleneck"' not in page and "no payback" not in page, path
