"""The running hour on every read (kpis.md section 0, "The window actually measured"): the
window of an open period runs to the published cut (portal.pipeline), not to the last whole
hour, and every read of it (the usage API and page, the KPIs, /metrics, the budget, the open
snapshots) answers as of that cut while the fold goes on adding.

The world, by hand: now is 16 December 2026 10:23:45 UTC. Pool p1 has 10 GPUs and no
capacity samples, so it is in service from 09:00, the hour of its first usage: the window
[1 December, 10:23:45) holds 5,025 in-service seconds, 50,250 GPU-seconds. llama-70b on it
makes 1,000 output tokens/s per GPU (R_ref); output is 1.00 USD per million tokens list, and
tenant-a's contract takes 10% off. It sent 500 output tokens at 09:30, 1,000 at 10:20 (3 min
45 s ago) and 2,000 at 10:23:44 (one second ago): 3,500 output tokens, TEF = 3.5 std GPU-s /
50,250 = 0.0000696517…, spent 3,500 × 0.90 / 10^6 = 0.00315 USD, 0.00 to the cent."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from prometheus_client.parser import text_string_to_metric_families

from billing.services.rating import rated_usage_update
from flywheel.models import KpiSnapshot
from flywheel.services.kpis import snapshots_update
from metering.models import RollupDelta
from metering.selectors.usage import deployment_hour_totals, hourly_usage_list, window_resolve
from metering.services.factory import VersionSpec, deployment_version_add
from metering.services.usage.rollup import usage_fold
from portal.models import Project
from portal.pipeline import cut_read
from portal.refresh import refresh_stamp
from tests.flywheel.factories import api_post, llama_on_p1

pytestmark = pytest.mark.both_backends

NOW = datetime(2026, 12, 16, 10, 23, 45, tzinfo=UTC)
HOUR = datetime(2026, 12, 16, 10, tzinfo=UTC)


@pytest.fixture
def api(users, token_client):
    return token_client(users["operator"], scopes=["ingest", "read", "admin"])


@pytest.fixture
def member(users, token_client):
    return token_client(users["tenant"], scopes=["read", "notify"])


def _event(event_id: str, at: str, output: int, **more) -> dict:
    return {"id": event_id, "time": at, "tenant": "tenant-a", "model": "llama-70b",
            "input_tokens": 0, "output_tokens": output, **more}  # fmt: skip


@pytest.fixture
def factory(api, tenant_a, member, django_capture_on_commit_callbacks):
    """The world of the module docstring, every stage run as the worker would once the
    events' transaction commits: the cut stands at 10:23:45."""
    llama_on_p1(api)
    api_post(api, "/api/v1/contracts", {"tenant": "tenant-a", "kind": "paid", "discount_pct": "10",
                                     "effective_from": "2026-01-01T00:00:00Z"})  # fmt: skip
    api_post(member, "/api/v1/alert-rules", {"kind": "budget", "params": {"tokens": 10_000}})
    with django_capture_on_commit_callbacks(execute=True):
        api_post(
            api,
            "/api/v1/usage/events",
            [
                _event("past", "2026-12-16T09:30:00Z", 500),
                _event("minutes", "2026-12-16T10:20:00Z", 1_000, ttft_ms=600),
                _event("second", "2026-12-16T10:23:44Z", 2_000, ttft_ms=600),
            ],
        )


def _usage_output(client, **params) -> int:
    response = client.get("/api/v1/usage", {"period": "this_month", **params})
    assert response.status_code == 200, response.json()
    return sum(row["output_tokens"] for row in response.json()["results"])


@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_every_read_of_this_month_counts_the_running_hour_to_the_cut(factory, api, member, now):
    kpis = api.get("/api/v1/kpis", {"period": "this_month"}).json()

    assert cut_read().until == NOW
    assert (kpis["from"], kpis["to"], kpis["data_until"]) == (
        "2026-12-01T00:00:00Z",
        "2026-12-16T10:23:45Z",
        "2026-12-16T10:23:45Z",
    )
    assert kpis["output_tokens"] == 3_500
    assert kpis["calendar_gpu_seconds"] == 50_250  # 10 GPUs from 09:00 to 10:23:45
    assert kpis["tef"] == pytest.approx(3.5 / 50_250, rel=1e-12)
    assert _usage_output(api) == 3_500
    assert _usage_output(api, granularity="hour") == 3_500
    budget = member.get("/api/v1/tenants/tenant-a/budget").json()
    assert (budget["spent"], budget["as_of"]) == (3_500, "2026-12-16T10:23:45Z")
    # The open day's and month's snapshots are measured over the same window, to the same
    # figures; /metrics publishes them.
    month = KpiSnapshot.objects.get(scope="factory", period_kind="month", period_start__month=12)
    assert month.period_end == NOW and not month.is_closed
    assert month.values["output_tokens"] == 3_500 and month.values["tef"] == kpis["tef"]
    gauges = _gauges(api)
    assert gauges["tef"] == kpis["tef"] and gauges["tps"] == kpis["tps"]


def _gauges(api) -> dict[str, float]:
    text = api.get("/metrics").content.decode()
    return {
        family.name.removeprefix("tokenfactory_"): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.labels.get("scope") == "factory"
    }


@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_what_the_fold_adds_after_the_cut_waits_for_the_next_cut(
    factory, api, member, session_client, users, now
):
    """The fold is faster than the rate: an event of the running hour folded after the cut
    is in the hour's rollup, but no read counts it (nor its rating, nor a calendar that
    stops before it) until the rate has rated it and moved the cut. A late event of a whole
    hour counts at once, as stored (its hour's calendar is whole)."""
    api_post(api, "/api/v1/usage/events", [_event("late-second", "2026-12-16T10:23:44Z", 4_000)])
    usage_fold()  # the fold alone: no stage runs on commit here

    assert hourly_usage_list().get(hour=HOUR).output_tokens == 7_000
    assert RollupDelta.objects.get(hour=HOUR).output_tokens == 4_000
    kpis = api.get("/api/v1/kpis", {"period": "this_month"}).json()
    assert (kpis["output_tokens"], kpis["to"]) == (3_500, "2026-12-16T10:23:45Z")
    assert _usage_output(api) == _usage_output(api, granularity="hour") == 3_500
    assert member.get("/api/v1/tenants/tenant-a/budget").json()["spent"] == 3_500
    assert _page_output(session_client(users["tenant"])) == 3_500

    rated_usage_update()  # the cut moves: 7,500 everywhere
    snapshots_update()

    assert _usage_output(api) == _usage_output(api, granularity="hour") == 7_500
    assert api.get("/api/v1/kpis", {"period": "this_month"}).json()["output_tokens"] == 7_500
    assert member.get("/api/v1/tenants/tenant-a/budget").json()["spent"] == 7_500
    assert _page_output(session_client(users["tenant"])) == 7_500
    usage_fold()
    assert not RollupDelta.objects.exists()  # the cut passed them: pruned


def _page_output(browser) -> int:
    """The output tokens the usage page shows this month (exact, on hover)."""
    page = browser.get("/usage/", {"period": "this_month"}).content.decode()
    marker = 'data-kpi="output_tokens" title="'
    return int(page.split(marker, 1)[1].split('"', 1)[0].replace(",", ""))


@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_the_usage_api_pages_through_the_running_hour_as_of_the_cut(factory, api, now):
    """One row an hour and deployment: 09:00 and 10:00, the running hour last, as of the cut
    even once a page of one row is all that is read."""
    api_post(api, "/api/v1/usage/events", [_event("after", "2026-12-16T10:23:44Z", 4_000)])
    usage_fold()

    query = {"period": "this_month", "granularity": "hour", "page_size": 1}
    rows = [api.get("/api/v1/usage", {**query, "page": page}).json() for page in (1, 2)]

    assert [r["count"] for r in rows] == [2, 2]
    assert [(r["results"][0]["period_start"], r["results"][0]["output_tokens"]) for r in rows] == [
        ("2026-12-16T09:00:00Z", 500),
        ("2026-12-16T10:00:00Z", 3_000),
    ]


@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_a_refold_of_the_running_hour_after_the_cut_waits_for_it_too(factory, api, now):
    """A tighter SLO from 10:00 folds the hour again from its raw events: its two requests
    (600 ms to the first token) miss it now. What the refold changed is a delta like any
    fold's, so the hour read as of the cut keeps its 3,000 compliant output tokens until the
    rate moves the cut."""
    deployment_version_add(
        deployment=hourly_usage_list().get(hour=HOUR).deployment,
        effective_from=HOUR,
        spec=VersionSpec(r_ref=Decimal(1000), slo_ttft_ms=500),
        by=None,
    )
    usage_fold()  # the refold

    def compliant_output() -> int:
        rows = deployment_hour_totals(hourly_usage_list().filter(hour=HOUR), end=NOW)
        return sum(row["co"] for row in rows)

    assert hourly_usage_list().get(hour=HOUR).compliant_output_tokens == 0
    assert compliant_output() == 3_000  # as of the cut
    rated_usage_update()
    assert compliant_output() == 0


@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_a_page_that_polls_gets_nothing_until_the_measurement_moves(factory, session_client, users):
    """The usage page and the tenant's home ask for themselves again while open (htmx,
    portal.refresh): a 204 while the window is measured where the page shows it, the page
    once it moved."""
    client = session_client(users["tenant"])
    shown = refresh_stamp(window_resolve({}))  # its time, and where the cut stands
    polled = {"HTTP_HX_REQUEST": "true", "HTTP_X_MEASURED": shown}

    for path in ("/usage/", "/"):
        assert client.get(path, **polled).status_code == 204, path
        page = client.get(path, **{**polled, "HTTP_X_MEASURED": "2026-12-16T10:23:15+00:00 1"})
        assert page.status_code == 200, path
        assert "measured until" in page.content.decode() and shown in page.content.decode()


def _by_project(field: str = "o") -> dict[int, int]:
    """Output tokens (or `co`, the compliant ones) of the running hour per project id, as of
    the cut."""
    rows = deployment_hour_totals(hourly_usage_list().filter(hour=HOUR), "project_id", end=NOW)
    return {row["project_id"]: row[field] for row in rows}


@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_a_delta_after_the_cut_keeps_its_project(factory, api, now):
    """kpis.md 3e: a project's event folded after the cut is that project's delta, so a read
    by project subtracts it from that project's row, not from the (none)'s: beta reads 0
    until the cut moves, the (none) its 3,500 throughout."""
    api_post(api, "/api/v1/usage/events",
          [_event("beta-second", "2026-12-16T10:23:44Z", 4_000, project="beta")])  # fmt: skip
    usage_fold()
    beta = Project.objects.get(slug="beta").pk

    assert list(RollupDelta.objects.values_list("project_id", "output_tokens")) == [(beta, 4_000)]
    for granularity in ("day", "hour"):
        assert _usage_output(api, project="beta", granularity=granularity) == 0
        assert _usage_output(api, project="(none)", granularity=granularity) == 3_500
    assert _by_project() == {0: 3_000}

    rated_usage_update()

    assert _usage_output(api, project="beta") == 4_000
    assert _usage_output(api, project="(none)") == 3_500
    assert _by_project() == {0: 3_000, beta: 4_000}


@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_a_refold_after_the_cut_keeps_each_projects_delta(factory, api, now):
    """A refold's deltas are per project too: the (none)'s 3,000 and beta's 1,000 compliant
    output tokens of the running hour stay as of the cut, each its own, until the rate moves
    the cut."""
    api_post(api, "/api/v1/usage/events",
          [_event("beta", "2026-12-16T10:21:00Z", 1_000, ttft_ms=600, project="beta")])  # fmt: skip
    usage_fold()
    rated_usage_update()  # the cut holds beta's event
    beta = Project.objects.get(slug="beta").pk
    deployment_version_add(
        deployment=hourly_usage_list().filter(hour=HOUR).first().deployment,
        effective_from=HOUR,
        spec=VersionSpec(r_ref=Decimal(1000), slo_ttft_ms=500),
        by=None,
    )
    usage_fold()  # the refold

    deltas = RollupDelta.objects.values_list("project_id", "compliant_output_tokens")
    assert sorted(deltas) == [(0, -3_000), (beta, -1_000)]
    assert _by_project(field="co") == {0: 3_000, beta: 1_000}
    rated_usage_update()
    assert _by_project(field="co") == {0: 0, beta: 0}
