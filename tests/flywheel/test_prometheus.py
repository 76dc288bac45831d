"""A real Prometheus scraping a running portal (architecture.md "Metrics and dashboards"):
the KPIs of a closed month computed in PromQL from the counters equal GET /api/v1/kpis, the
counters never decrease (late usage, a refold, restarts of the portal), every panel of the
dashboards answers, and promtool finds nothing to say of /metrics.

The portal (gunicorn, on the test database) serves a factory built through the API in three
states, as the measure stage leaves the database at each test clock: at 00:30 on 1 October
with September metered, at 00:30 on 1 November with October metered and closed (then a
restart of the portal), at 03:30 on 1 November with three hours of November, then late usage
and a refold. The counters are the database's alone: the portal's own clock (03:30 on 1
November throughout, so it starts once and restarts once) sets only this month's gauges.
Prometheus samples each state as it is served (it cannot be given past samples), so a
month's increase is the difference of the counters' values at an instant of the state after
it and one of the state before (PromQL's `@`): exactly what a Prometheus scraping through
October would have read at its two ends.
"""

import io
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from flywheel.domain.counters import COUNTERS as COUNTER_FAMILIES
from portal.clock import clock_set
from portal.models import Tenant
from portal.pipeline import stages_run
from portal.services import token_create
from tests.conftest import clock_env
from tests.servers import Prometheus, free_port, wait_for_port

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
SEPTEMBER, OCTOBER, NOVEMBER = (datetime(2026, month, 1, tzinfo=UTC) for month in (9, 10, 11))
HALF_HOUR = timedelta(minutes=30)
LAST = NOVEMBER + timedelta(hours=3, minutes=30)  # the last state's clock, and the portal's
M = 1_000_000
COUNTERS = '{__name__=~"tokenfactory_.+_total"}'


def _post(api, path: str, body) -> None:
    response = api.post(path, body, format="json")
    assert response.status_code in (200, 201), (path, response.json())


def _factory(api) -> None:
    """Two pools in service from September: llama-70b on 8 H100s (R_ref 1,000, TTFT SLO
    2,000 ms) and qwen-32b on 4 B200s (R_ref 2,500, w_in 0.25); list prices per million;
    tenant A paid at 10% off, B on trial, C paid at list."""
    for pool, gpus, healthy, busy in (("h100-a", 8, 7, 5), ("b200-a", 4, 4, 2)):
        _post(api, "/api/v1/pools", {"slug": pool, "name": pool, "gpu_type": pool[:4].upper(),
                                     "gpu_count": gpus})  # fmt: skip
        _post(api, "/api/v1/capacity", [{"pool": pool, "time": SEPTEMBER.isoformat(),
                                         "gpus_installed": gpus, "gpus_healthy": healthy,
                                         "gpus_busy": busy}])  # fmt: skip
    for model, pool, r_ref, w_in, prices in (
        ("llama-70b", "h100-a", "1000", "0", {"input": "0.50", "output": "2.00"}),
        ("qwen-32b", "b200-a", "2500", "0.25", {"input": "0.20", "output": "0.80"}),
    ):
        _post(api, "/api/v1/models", {"slug": model, "name": model})
        _post(api, "/api/v1/deployments", {"model": model, "pool": pool, "slug": f"{model}@{pool}",
                                           "r_ref": r_ref, "w_in": w_in, "slo_ttft_ms": 2000})  # fmt: skip
        for token_class, per_million in prices.items():
            _post(api, "/api/v1/prices", {"model": model, "token_class": token_class,
                                          "per_million": per_million, "currency": "USD",
                                          "effective_from": "2026-01-01T00:00:00Z"})  # fmt: skip
    for tenant, kind, discount in (("tenant-a", "paid", "10"), ("tenant-b", "trial", "0"),
                                   ("tenant-c", "paid", "0")):  # fmt: skip
        _post(api, "/api/v1/contracts", {"tenant": tenant, "kind": kind, "discount_pct": discount,
                                         "effective_from": "2026-01-01T00:00:00Z"})  # fmt: skip


def _usage(api, start: datetime, end: datetime, tag: str) -> None:
    """Three rounds a day of [start, end): A on llama (1 M in, 2 M out), B on qwen (1 M in
    and out), C on llama (2 M in, 1 M out; too slow on odd days) and a failed qwen request
    of C's. Whole millions at these prices and discounts: realized revenue in whole cents."""
    events, hour = [], start
    while hour < end:
        at = (hour + timedelta(minutes=20)).isoformat()
        slow = 3000 if hour.day % 2 else 900
        for tenant, model, i, o, extra in (
            ("tenant-a", "llama-70b", M, 2 * M, {"ttft_ms": 800}),
            ("tenant-b", "qwen-32b", M, M, {"ttft_ms": 500}),
            ("tenant-c", "llama-70b", 2 * M, M, {"ttft_ms": slow}),
            ("tenant-c", "qwen-32b", 0, M, {"status": "error"}),
        ):
            events.append({"id": f"{tag}-{len(events)}", "time": at, "tenant": tenant,
                           "model": model, "input_tokens": i, "output_tokens": o, **extra})  # fmt: skip
        hour += timedelta(hours=8)
    for first in range(0, len(events), 500):
        _post(api, "/api/v1/usage/events", events[first : first + 500])
    stages_run()


class Portal:
    """The portal under gunicorn on the test database at a clock, restarted at will."""

    def __init__(self, directory: Path) -> None:
        self.port, self.log = free_port(), directory / "portal.log"
        self.process: subprocess.Popen | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *, now: datetime) -> None:
        db = connection.settings_dict
        env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "DEBUG": "1",  # the test clock (PORTAL_NOW) is honoured with DEBUG only
            **clock_env(now),
        }
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind",
                 self.target, "--workers", "1", "--threads", "2", "--timeout", "60"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        wait_for_port(self.port, self.process, self.log)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None

    def get(self, path: str, token: str) -> bytes:
        request = urllib.request.Request(
            f"http://{self.target}{path}", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.read()


UNTIL = "tokenfactory_counted_until_timestamp_seconds"
TOKENS_A = 'tokenfactory_tenant_tokens_total{tenant="tenant-a"}'


def _scraped_after(prometheus: Prometheus, moment: float) -> float:
    """Wait for a scrape after `moment` (Unix time); its time."""
    prometheus.wait_for(f"timestamp({UNTIL}) > {moment}", bool)
    return prometheus.value(f"timestamp({UNTIL})")


def _scraped_until(prometheus: Prometheus, until: datetime) -> float:
    """Wait until Prometheus has scraped counters that count up to `until` twice; the time
    of the second of those scrapes."""
    prometheus.wait_for(f"{UNTIL} == {until.timestamp()}", bool)
    return _scraped_after(prometheus, prometheus.value(f"timestamp({UNTIL})"))


def _values(prometheus: Prometheus, *, at: float) -> dict[tuple, float]:
    return {
        tuple(sorted(series["metric"].items())): float(series["value"][1])
        for series in prometheus.query(COUNTERS, at=at)
    }


def _month(metric: str, before: float, after: float, scope: str = "") -> str:
    """PromQL: the counter's growth between two instants (summed over the pools, or of one)."""
    where = f'{{pool="{scope}"}}' if scope else ""
    name = f"tokenfactory_{metric}_total{where}"
    return f"(sum({name} @ {after}) - sum({name} @ {before}))"


def _panels() -> list[tuple[str, str, str]]:
    """(dashboard, panel title, expression) of every panel of deploy/grafana/dashboards."""
    found = []
    for path in sorted((settings.BASE_DIR / "deploy" / "grafana" / "dashboards").glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            found += [(path.name, panel["title"], t["expr"]) for t in panel["targets"]]
    return found


def test_prometheus_reads_a_closed_month_and_counters_that_never_decrease(
    tmp_path, users, token_client, tenant_a, tenant_b, capsys
):
    Tenant.objects.create(slug="tenant-c", name="Tenant C")
    started = time.monotonic()
    clock_set(OCTOBER + HALF_HOUR)
    api = token_client(users["operator"], scopes=["ingest", "read", "admin"])
    _factory(api)
    _usage(api, SEPTEMBER, OCTOBER, "sep")
    _, token = token_create(user=users["operator"], name="prometheus", scopes=["read"])
    portal = Portal(tmp_path)
    portal.start(now=LAST)
    prometheus = Prometheus(target=portal.target, token=token, directory=tmp_path)
    try:
        at_october = _scraped_until(prometheus, OCTOBER)

        # October: the B200s lose a GPU from the 15th; its usage; the month closed.
        clock_set(NOVEMBER + HALF_HOUR)
        _post(api, "/api/v1/capacity", [{"pool": "b200-a", "time": "2026-10-15T12:00:00Z",
                                         "gpus_installed": 4, "gpus_healthy": 3,
                                         "gpus_busy": 2}])  # fmt: skip
        _usage(api, OCTOBER, NOVEMBER, "oct")
        call_command("close", "--month", "2026-10", stdout=io.StringIO())
        at_november = _scraped_until(prometheus, NOVEMBER)
        counted = _values(prometheus, at=at_november)
        assert counted != _values(prometheus, at=at_october)
        portal.stop()  # a restart reads the same values: they are the database's
        portal.start(now=LAST)
        assert _values(prometheus, at=_scraped_after(prometheus, prometheus.now())) == counted

        kpis = {
            scope: json.loads(portal.get(f"/api/v1/kpis?period=2026-10&scope={scope}", token))
            for scope in ("factory", "h100-a", "b200-a")
        }
        assert kpis["factory"]["telemetry"] == "measured"
        growth = {
            metric: _month(metric, at_october, at_november)
            for metric in ("calendar_gpu_seconds", "standard_gpu_seconds",
                           "paid_compliant_standard_gpu_seconds", "list_value",
                           "realized_revenue")
        }  # fmt: skip
        tef = f"{growth['standard_gpu_seconds']} / {growth['calendar_gpu_seconds']}"
        tfi = (
            f"{growth['paid_compliant_standard_gpu_seconds']} / {growth['calendar_gpu_seconds']}"
            f" * {growth['realized_revenue']} / {growth['list_value']}"
        )
        figures = {
            "tef": prometheus.value(tef),
            "tfi": prometheus.value(tfi),
            "realized_revenue": prometheus.value(growth["realized_revenue"]),
        }
        for pool in ("h100-a", "b200-a"):
            figures[f"tef {pool}"] = prometheus.value(
                f"{_month('standard_gpu_seconds', at_october, at_november, pool)}"
                f" / {_month('calendar_gpu_seconds', at_october, at_november, pool)}"
            )
        expected = {
            "tef": kpis["factory"]["tef"],
            "tfi": kpis["factory"]["tfi"],
            "realized_revenue": float(kpis["factory"]["realized_revenue"]),
            "tef h100-a": kpis["h100-a"]["tef"],
            "tef b200-a": kpis["b200-a"]["tef"],
        }
        assert figures == pytest.approx(expected, rel=1e-9)
        assert 0 < figures["tfi"] < figures["tef"] < 1

        # The same month through increase() and rate(), as the dashboards read: a range
        # from the scrape at October's start to the one at November's (both ends included,
        # so nothing is extrapolated), against October by hand.
        seconds = round((at_november - at_october) * 1000) / 1000
        window = f"[{round(seconds * 1000)}ms] @ {at_november}"

        def increase(metric: str, where: str = "") -> float:
            return prometheus.value(f"sum(increase(tokenfactory_{metric}_total{where}{window}))")

        october = {
            "calendar": increase("calendar_gpu_seconds"),
            "busy": prometheus.value(f"sum(rate(tokenfactory_busy_gpu_seconds_total{window}))")
            * seconds,
            "standard": increase("standard_gpu_seconds"),
            "list_value": increase("list_value"),
            "realized_revenue": increase("realized_revenue"),
            "tenant-a tokens": increase("tenant_tokens", '{tenant="tenant-a"}'),
            "tenant-c requests": increase("tenant_requests", '{tenant="tenant-c"}'),
        }
        by_hand = {
            "calendar": 12 * 31 * 86_400,  # 8 + 4 GPUs installed all month: 32,140,800
            "busy": (5 + 2) * 31 * 86_400,  # 18,748,800
            # 93 rounds: llama's 3 M output at R_ref 1,000 (279,000 s) and qwen's 1.25 M
            # weighted of B's and 1 M of C's failed request at R_ref 2,500 (83,700 s)
            "standard": 93 * (3 * M / 1_000 + 2.25 * M / 2_500),  # 362,700
            # paid: A's 1 M input at 0.50 and 2 M output at 2.00 (4.50), C's 2 M input and
            # 1 M output (3.00); A realizes 90% (4.05); B is on trial
            "list_value": 93 * (4.50 + 3.00),  # 697.50
            "realized_revenue": 93 * (4.05 + 3.00),  # 655.65
            "tenant-a tokens": 93 * 3 * M,
            "tenant-c requests": 93 * 2,
        }
        assert october == pytest.approx(by_hand, rel=1e-9)
        assert october["standard"] / october["calendar"] == pytest.approx(expected["tef"], rel=1e-9)

        # November's first three hours, then a late event at 01:40 (an open month's hour
        # already counted) and a refold of November from its raw events.
        clock_set(LAST)
        _usage(api, NOVEMBER, NOVEMBER + timedelta(hours=3), "nov")
        at = _scraped_until(prometheus, NOVEMBER + timedelta(hours=3))
        before_late, tokens = _values(prometheus, at=at), prometheus.value(TOKENS_A, at=at)
        _post(api, "/api/v1/usage/events", [{"id": "late", "time": "2026-11-01T01:40:00Z",
                                             "tenant": "tenant-a", "model": "llama-70b",
                                             "input_tokens": M, "output_tokens": M}])  # fmt: skip
        stages_run()
        prometheus.wait_for(f"{TOKENS_A} == {tokens + 2 * M}", bool)
        after_late = _values(prometheus, at=_scraped_after(prometheus, prometheus.now()))
        assert all(after_late[key] >= value for key, value in before_late.items())
        call_command("refold", "--period", "2026-11", stdout=io.StringIO())
        assert _values(prometheus, at=_scraped_after(prometheus, prometheus.now())) == after_late

        # Over the whole run, no counter series ever decreased (Prometheus counts a fall
        # as a reset).
        span = f"{int(time.monotonic() - started) + 60}s"
        for family in COUNTER_FAMILIES:
            assert prometheus.query(f"resets({family.sample_name}[{span}]) > 0") == []

        # Every panel of the dashboards answers with at least one series.
        report = []
        for board, title, expr in _panels():
            query = (
                expr.replace("$__rate_interval", span)
                .replace("$__range", span)
                .replace('=~"$pool"', '=~".*"')
                .replace('=~"$tenant"', '=~".*"')
            )
            result = prometheus.query(query)
            assert result, (board, title, query)
            report.append(f"{board} | {title}\n  {query}\n  → {result[0]['metric']} "
                          f"{result[0]['value'][1]}")  # fmt: skip

        promtool = shutil.which("promtool")
        assert promtool, "promtool is missing: run scripts/ensure-system-packages.sh"
        checked = subprocess.run(
            [promtool, "check", "metrics"], input=portal.get("/metrics", token),
            capture_output=True, check=False,
        )  # fmt: skip
        assert (checked.returncode, checked.stdout, checked.stderr) == (0, b"", b"")
    finally:
        prometheus.close()
        portal.stop()
        clock_set(None)
    with capsys.disabled():
        print("\nEvery dashboard panel's query and its first series:")
        print("\n".join(report))
        print("October from the counters:", figures, "\n/api/v1/kpis:", expected)
        print("October by increase() and rate():", october, "\nby hand:", by_hand)
