"""The counters of /metrics (architecture.md "Metrics and dashboards"): what each counts, by
hand; that they advance as hours close and never decrease; that they are read from the
database; the per-tenant switch."""

import io
import re
import shutil
import subprocess
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families

from billing.services.reservations import reservation_create
from flywheel.domain.counters import COUNTERS, TENANT_TOKENS, MonthCounts, label_text
from flywheel.models import CounterMonth, CounterValue
from flywheel.services.kpis import snapshots_update
from metering.models import Deployment
from portal.models import Tenant
from portal.pipeline import stages_run
from tests.billing.factories import make_contract, make_priced_model, post_usage

pytestmark = pytest.mark.both_backends

NOV = datetime(2026, 11, 1, tzinfo=UTC)
M = 1_000_000
# The default test clock is 2026-12-16 10:00 and the fold completes at it: the counters count
# [Nov 1, Dec 16 10:00), 45 days and 10 hours: 3,924,000 s.
SECONDS = 45 * 86_400 + 10 * 3_600


@pytest.fixture
def api(users, token_client):
    return token_client(users["operator"], scopes=["ingest", "read", "admin"])


@pytest.fixture
def factory(api, tenant_a, tenant_b):
    """One pool of 8 GPUs in service from November (6 healthy, 4 busy throughout), llama-70b
    at R_ref 1,000 priced 0.88 per million input and output tokens; tenant A paid with a 10%
    discount, tenant B on trial. In November: A's request of 1 M input and 2 M output
    tokens, a failed one of A's (100,000 output tokens), B's of 0.5 M input and 1 M output."""
    make_priced_model()
    make_contract(tenant_a, discount_pct=Decimal(10))
    make_contract(tenant_b, kind="trial")
    sample = {"pool": "h100-a", "time": "2026-11-01T00:00:00Z", "gpus_installed": 8,
              "gpus_healthy": 6, "gpus_busy": 4}  # fmt: skip
    assert api.post("/api/v1/capacity", [sample]).status_code in (200, 201)
    at = "2026-11-10T12:00:00Z"
    post_usage(api, [{"id": "a1", "time": at, "input_tokens": M, "output_tokens": 2 * M},
                     {"id": "a2", "time": at, "input_tokens": 0, "output_tokens": 100_000,
                      "status": "error"}])  # fmt: skip
    post_usage(api, [{"id": "b1", "time": at, "input_tokens": M // 2, "output_tokens": M}],
               tenant="tenant-b")  # fmt: skip
    snapshots_update()


def _published() -> dict[tuple, Decimal]:
    """Every series' value as stored: (counter, label values) → value."""
    return {
        (row.name, tuple(re.findall(r'="([^"]*)"', row.labels))): row.value
        for row in CounterValue.objects.all()
    }


def test_counters_count_each_figure_by_hand(factory):
    values = _published()

    assert values[("tokenfactory_calendar_gpu_seconds", ("h100-a",))] == 8 * SECONDS
    assert values[("tokenfactory_available_gpu_seconds", ("h100-a",))] == 6 * SECONDS
    assert values[("tokenfactory_busy_gpu_seconds", ("h100-a",))] == 4 * SECONDS
    # std = output tokens / R_ref (w_in 0): 2,000 + 100 + 1,000; compliant: the ok ones (no
    # SLO threshold); paid and compliant: A's ok request.
    assert values[("tokenfactory_standard_gpu_seconds", ("h100-a",))] == 3_100
    assert values[("tokenfactory_compliant_standard_gpu_seconds", ("h100-a",))] == 3_000
    assert values[("tokenfactory_paid_compliant_standard_gpu_seconds", ("h100-a",))] == 2_000
    assert values[("tokenfactory_reserved_gpu_seconds", ("h100-a",))] == 0
    # 3 M tokens at 0.88 per million; 10% off.
    assert values[("tokenfactory_list_value", ("h100-a", "USD"))] == Decimal("2.64")
    assert values[("tokenfactory_realized_revenue", ("h100-a", "USD"))] == Decimal("2.376")
    tokens = {labels[2]: v for (name, labels), v in values.items() if name == "tokenfactory_tokens"}
    assert tokens == {"input": 1_500_000, "cached_input": 0, "cache_write": 0,
                      "output": 3_100_000, "reasoning": 0}  # fmt: skip
    assert values[("tokenfactory_requests", ("h100-a", "llama-70b", "ok"))] == 2
    assert values[("tokenfactory_requests", ("h100-a", "llama-70b", "error"))] == 1
    assert values[("tokenfactory_tenant_tokens", ("tenant-a",))] == 3_100_000
    assert values[("tokenfactory_tenant_tokens", ("tenant-b",))] == 1_500_000
    assert values[("tokenfactory_tenant_requests", ("tenant-a",))] == 2
    assert values[("tokenfactory_tenant_compliant_requests", ("tenant-a",))] == 1
    assert values[("tokenfactory_tenant_compliant_requests", ("tenant-b",))] == 1


def _months_sum(figure: str) -> Decimal:
    """The sum over the months' parts of the pool's `figure` (what the counter would be
    without its floor)."""
    return sum(Decimal(row.counts["pools"]["h100-a"][figure]) for row in CounterMonth.objects.all())


def _scraped(api) -> dict[tuple, float]:
    response = api.get("/metrics")
    assert response.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_the_reserved_counter_counts_a_reservation_made_since_by_hand(factory, tenant_a):
    """Tenant A reserves 2 GPUs for a month from Nov 10 13:00 (after its request): to Dec 10
    13:00, 2 × 30 days = 5,184,000 GPU-seconds, the November days already measured measured
    again (kpis.md 3d)."""
    reservation_create(tenant=tenant_a, deployment=Deployment.objects.get(), gpus=2,
                       hourly_rate=Decimal("1.00"), term="1m",
                       starts_at=datetime(2026, 11, 10, 13, tzinfo=UTC))  # fmt: skip
    stages_run()

    assert _published()[("tokenfactory_reserved_gpu_seconds", ("h100-a",))] == 5_184_000


def test_metrics_publish_the_counters_read_from_the_database(factory, api):
    """What /metrics says is what the database holds: a process that starts afresh (a
    restart) reads the same values; HELP and TYPE lines as Prometheus names them."""
    scraped = _scraped(api)
    text = api.get("/metrics").content.decode()

    for (name, labels), value in _published().items():
        names = next(family.labels for family in COUNTERS if family.name == name)
        key = (f"{name}_total", tuple(sorted(zip(names, labels, strict=True))))
        assert scraped[key] == float(value)
    assert "# TYPE tokenfactory_busy_gpu_seconds_total counter" in text
    assert "# HELP tokenfactory_tenant_requests_total Requests of the tenant" in text
    until = scraped[("tokenfactory_counted_until_timestamp_seconds", ())]  # Dec 16 10:00
    assert until == datetime(2026, 12, 16, 10, tzinfo=UTC).timestamp()


def test_counters_never_decrease_across_late_events_a_refold_and_a_correction(factory, api):
    """Late usage of the open month (this hour's last one, and a day earlier) raises them; a
    refold of November from its raw events leaves them; a capacity sample posted again with
    fewer healthy GPUs lowers November's figures, and the published A waits for later growth
    instead of falling (Prometheus would read a fall as a reset)."""
    from portal.clock import clock_set

    before = _published()
    post_usage(api, [{"id": "late1", "time": "2026-12-16T09:15:00Z", "input_tokens": 10,
                      "output_tokens": 1_000},
                     {"id": "late2", "time": "2026-12-02T08:00:00Z", "input_tokens": 20,
                      "output_tokens": 3_000}])  # fmt: skip
    snapshots_update()
    after_late = _published()
    assert all(after_late[key] >= value for key, value in before.items())
    assert after_late[("tokenfactory_standard_gpu_seconds", ("h100-a",))] == 3_104
    assert after_late[("tokenfactory_tenant_tokens", ("tenant-a",))] == 3_104_030

    call_command("refold", "--period", "2026-11", stdout=io.StringIO())
    assert _published() == after_late

    sample = {"pool": "h100-a", "time": "2026-11-01T00:00:00Z", "gpus_installed": 8,
              "gpus_healthy": 5, "gpus_busy": 4}  # fmt: skip
    assert api.post("/api/v1/capacity", [sample]).status_code in (200, 201)
    stages_run()
    available = ("tokenfactory_available_gpu_seconds", ("h100-a",))
    assert _months_sum("available") == 5 * SECONDS
    assert _published()[available] == 6 * SECONDS
    clock_set(datetime(2026, 12, 16, 12, 30, tzinfo=UTC))  # two more hours close
    stages_run()
    after = _published()
    assert _months_sum("available") == 5 * (SECONDS + 7_200)
    assert after[available] == 6 * SECONDS  # still above the sum of months
    assert after[("tokenfactory_calendar_gpu_seconds", ("h100-a",))] == 8 * (SECONDS + 7_200)
    assert all(after[key] >= value for key, value in after_late.items())


def _tokens(tier: str, kind: str = "output") -> Decimal | None:
    return _published().get(("tokenfactory_tokens", ("h100-a", "llama-70b", kind, tier)))


def test_tokens_are_counted_by_the_service_tier_their_rollups_hold(factory, api):
    """December on the same pool and model: a priority request of 1,000 output tokens and
    standard ones of 3,000 give a priority series of 1,000 beside the standard one (3,100,000
    of November + 3,000); a later priority request of 500 raises only the priority series; a
    month's part counted before usage was kept by tier reads as standard."""
    post_usage(api, [{"id": "p1", "time": "2026-12-03T10:00:00Z", "input_tokens": 0,
                      "output_tokens": 1_000, "service_tier": "priority"},
                     {"id": "s1", "time": "2026-12-03T10:00:00Z", "input_tokens": 0,
                      "output_tokens": 3_000}])  # fmt: skip
    snapshots_update()

    assert (_tokens("standard"), _tokens("priority")) == (3_103_000, 1_000)
    assert (_tokens("priority", "input"), _tokens("flex"), _tokens("batch")) == (0, None, None)
    before = _published()
    post_usage(api, [{"id": "p2", "time": "2026-12-04T10:00:00Z", "input_tokens": 0,
                      "output_tokens": 500, "service_tier": "priority"}])  # fmt: skip
    snapshots_update()
    after = _published()
    assert (_tokens("standard"), _tokens("priority")) == (3_103_000, 1_500)
    assert all(after[key] >= value for key, value in before.items())
    legacy = MonthCounts.from_json({"deployments": {"7": {"output_tokens": 5}}})
    assert legacy.deployments == {(7, "standard"): {"output_tokens": 5}}


@override_settings(METRICS_TENANT_LABELS=False)
def test_tenant_counters_are_left_out_when_switched_off(factory, api):
    names = {name for name, _ in _scraped(api)}

    assert "tokenfactory_tokens_total" in names
    assert not any(name.startswith("tokenfactory_tenant_") for name in names)


def test_promtool_finds_nothing_to_say_of_the_metrics(factory, api):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: run scripts/ensure-system-packages.sh")
    text = api.get("/metrics").content

    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, check=False
    )

    assert (checked.returncode, checked.stdout, checked.stderr) == (0, b"", b"")


def test_a_scrape_reads_as_many_queries_whatever_the_tenants(factory, api, tenant_a):
    """The counters are read as stored, one row a series: more tenants are more rows, not
    more queries (make bench goal 24 times a scrape with 1,000 tenants)."""
    with CaptureQueriesContext(connection) as two:
        assert api.get("/metrics").status_code == 200
    Tenant.objects.bulk_create(Tenant(slug=f"more-{n}", name=f"More {n}") for n in range(20))
    post_usage(api, [{"id": f"m{n}", "tenant": f"more-{n}", "time": "2026-12-03T10:00:00Z",
                      "input_tokens": 5, "output_tokens": 5} for n in range(20)])  # fmt: skip
    snapshots_update()

    with CaptureQueriesContext(connection) as more:
        scraped = _scraped(api)

    assert len(more.captured_queries) == len(two.captured_queries)
    assert scraped[("tokenfactory_tenant_requests_total", (("tenant", "more-7"),))] == 1


def test_label_values_are_escaped_as_the_text_format_asks():
    assert label_text(TENANT_TOKENS, ['a"b\\c\nd']) == 'tenant="a\\"b\\\\c\\nd"'
