"""Fresh to the minute (kpis.md section 0): a tenant's gateway sends requests of the running
hour, a few minutes ago and one second ago; within 60 s of their acceptance the usage API,
the KPIs, the budget and the tenant's usage page all count them exactly, as the worker folds,
rates and measures them, and /metrics publishes what /api/v1/kpis returns. The pages a tenant
keeps open (its usage page, its home) refresh the figure without a reload, at most every 30 s
while the tab is visible.

The world: now is 16 December 2026 10:23:45 UTC; pool p1 (10 GPUs) serves llama-70b, at 1.00
USD per million output tokens; tenant-a has a paid contract and a token budget of 100,000."""

import json
import time
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from prometheus_client.parser import text_string_to_metric_families

from billing.services.pricing import contract_create, price_create
from metering.models import ServedModel
from portal.alerts import rule_create
from portal.services import token_create
from tests.e2e.conftest import login, screenshot
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.e2e

NOW = datetime(2026, 12, 16, 10, 23, 45, tzinfo=UTC)
MINUTE = 60.0  # seconds from acceptance to every read counting the events (kpis.md section 0)


@pytest.fixture
def world(users, tenant_a):
    """The factory of the module docstring, and the operator's API token (ingest, read)."""
    make_deployment(model="llama-70b", pool="p1", gpus=10)
    served = ServedModel.objects.get(slug="llama-70b")
    for token_class in ("input", "output"):
        price_create(model=served, token_class=token_class, per_million=Decimal("1.00"),
                     currency="USD", effective_from=datetime(2026, 1, 1, tzinfo=UTC))  # fmt: skip
    contract_create(tenant=tenant_a, kind="paid", effective_from=datetime(2026, 1, 1, tzinfo=UTC),
                    currency="USD")  # fmt: skip
    rule_create(kind="budget", by=users["tenant"], params={"tokens": 100_000})
    _, raw = token_create(user=users["operator"], name="gateway", scopes=["ingest", "read"])
    return {"Authorization": f"Bearer {raw}"}


def _events(prefix: str, *outputs_at: tuple[int, str]) -> list[dict]:
    return [
        {"id": f"{prefix}{i}", "time": at, "tenant": "tenant-a", "model": "llama-70b",
         "input_tokens": 0, "output_tokens": output}
        for i, (output, at) in enumerate(outputs_at)
    ]  # fmt: skip


def _post(page, headers, events) -> float:
    """Post a batch through the API; the monotonic instant it was accepted."""
    response = page.request.post(
        "/api/v1/usage/events",
        headers={**headers, "Content-Type": "application/json"},
        data=json.dumps(events),
    )
    assert response.ok, response.text()
    return time.monotonic()


def _reads(page, headers) -> dict[str, int]:
    """The output tokens of this month by every read a tenant or its gateway makes."""
    usage = page.request.get("/api/v1/usage?period=this_month", headers=headers).json()
    kpis = page.request.get("/api/v1/kpis?period=this_month", headers=headers).json()
    budget = page.request.get("/api/v1/tenants/tenant-a/budget", headers=headers).json()
    return {
        "usage": sum(row["output_tokens"] for row in usage["results"]),
        "kpis": kpis["output_tokens"] or 0,
        "budget": budget["spent"] or 0,
    }


def _page_output(page) -> int:
    return int(page.locator('[data-kpi="output_tokens"]').get_attribute("title").replace(",", ""))


def _poll(page, milliseconds: int) -> int:
    """Run the page's clock `milliseconds` on: the status of the refresh it sends."""
    with page.expect_response(lambda r: r.request.headers.get("hx-request") == "true") as info:
        page.clock.run_for(milliseconds)
    return info.value.status


def _kpis_and_metrics(page, headers) -> tuple[dict, dict]:
    """/api/v1/kpis and /metrics read at one moment: between two identical KPI reads."""
    for _ in range(20):
        before = page.request.get("/api/v1/kpis?period=this_month", headers=headers).json()
        text = page.request.get("/metrics", headers=headers).text()
        after = page.request.get("/api/v1/kpis?period=this_month", headers=headers).json()
        if before == after:
            gauges = {
                family.name.removeprefix("tokenfactory_"): sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
                if sample.labels.get("scope") == "factory"
            }
            return before, gauges
    pytest.fail("the KPIs kept moving")


@pytest.mark.integration
@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_requests_of_the_running_hour_reach_every_read_within_a_minute(
    pipeline_worker, world, page, now
):
    accepted = _post(
        page,
        world,
        _events("g", (1_000, "2026-12-16T10:20:00Z"), (2_000, "2026-12-16T10:23:44Z")),
    )
    login(page, "tenant-tenant-a", "correct-horse-battery-staple")
    seen = {}
    while time.monotonic() - accepted < MINUTE:
        seen = _reads(page, world)
        if seen == {"usage": 3_000, "kpis": 3_000, "budget": 3_000}:
            page.goto("/usage/?period=this_month")
            seen["page"] = _page_output(page)
            if seen["page"] == 3_000:
                break
        time.sleep(0.5)
    waited = time.monotonic() - accepted

    assert seen == {"usage": 3_000, "kpis": 3_000, "budget": 3_000, "page": 3_000}, seen
    assert waited < MINUTE
    assert "measured until 2026-12-16 10:23:45 UTC" in page.locator("#measured").inner_text()
    screenshot(page, "running-hour-usage-page")
    kpis, gauges = _kpis_and_metrics(page, world)
    assert kpis["output_tokens"] == 3_000
    for name in ("tef", "tfi", "tps", "availability", "occupancy", "efficiency"):
        assert gauges.get(name) == kpis[name], name


@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_the_usage_page_refreshes_its_figures_while_open_and_visible(world, page, now):
    """The stages run as each write commits (eager, in the server's thread). The page asks
    for itself again every 30 s while the tab is visible: nothing to swap while the cut
    stands, the new figures without a reload once it moved, and no request while hidden."""
    _post(page, world, _events("a", (1_000, "2026-12-16T10:20:00Z")))
    page.clock.install()
    login(page, "tenant-tenant-a", "correct-horse-battery-staple")
    page.goto("/usage/?period=this_month")
    page.evaluate("() => { window.loadedOnce = true; }")
    polls = []
    page.on("request", lambda r: polls.append(r) if r.headers.get("hx-request") else None)
    assert _page_output(page) == 1_000

    page.clock.run_for(29_000)
    assert polls == []  # not before 30 s
    assert _poll(page, 6_000) == 204 and _page_output(page) == 1_000  # nothing moved

    _post(page, world, _events("b", (2_000, "2026-12-16T10:23:44Z")))
    assert _poll(page, 35_000) == 200
    page.clock.run_for(1_000)  # htmx settles the swap on a timer
    assert len(polls) == 2
    assert _page_output(page) == 3_000
    assert page.evaluate("() => window.loadedOnce") is True  # swapped in, not reloaded
    drawn = "() => document.querySelector('#usage-chart').data.flatMap(t => t.y)"
    assert sum(page.evaluate(drawn)) == 3_000  # the new chart drawn

    page.evaluate(
        "() => { Object.defineProperty(document, 'visibilityState', {value: 'hidden'});"
        " document.dispatchEvent(new Event('visibilitychange')); }"
    )
    page.clock.run_for(120_000)
    assert len(polls) == 2  # hidden: no request
