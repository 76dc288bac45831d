"""Telemetry storage: pushes and scrapes of vLLM, SGLang and DCGM, reconciliation, SLO, API."""

import os
import re
import signal
import threading
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from metering.domain.telemetry.histogram_json import histogram_to_json
from metering.domain.telemetry.parse import parse_scrape
from metering.models import EngineHourly, GpuHourly, ScrapeTarget, TelemetryPushState
from metering.selectors.telemetry import (
    gpu_pool_hourly_list,
    reconciliation_list,
    scrape_target_health,
    slo_attainment_from_engine,
)
from metering.services.telemetry.ingest import telemetry_ingest
from metering.services.telemetry.scrape import scrape_all, scrape_target
from metering.tasks import scrape_targets_task
from tests.concurrency import run_together
from tests.metering.factories import make_deployment, make_hourly_usage
from tests.servers import free_port

pytestmark = pytest.mark.both_backends

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "samples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
HOUR = datetime(2026, 3, 1, 10, tzinfo=UTC)
PUSH_URL = "/api/v1/telemetry/prometheus"


def _sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def _at(minute: int, hour: int = 10) -> datetime:
    return datetime(2026, 3, 1, hour, minute, tzinfo=UTC)


def _llama():
    """The Llama 8B deployment on pool h100-a, its engine name as an alias."""
    return make_deployment(model="llama-8b", pool="h100-a", aliases=[LLAMA_8B], ttft=2000, tpot=50)


def _push_sample(deployment, name: str, kind: str, minute: int):
    """Push the sample exposition `name` for `deployment`'s pool at `minute` past 10:00."""
    return telemetry_ingest(text=_sample(name), kind=kind, pool=deployment.pool, now=_at(minute))


def _bumped(text: str, bump) -> str:
    """The exposition with `bump(series)` added to each sample's value (None: unchanged)."""
    lines = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            extra = bump(series)
            if extra:
                line = f"{series} {float(value) + extra!r}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def _sglang_second_scrape(series: str) -> float | None:
    """SGLang 30 s later: +1,000 prompt and +2,000 generation tokens, two requests with a
    TTFT in (1, 2.5] s, 1,000 TPOT observations in (0.075, 0.1] s, eight more running."""
    le = re.search(r'le="([^"]+)"', series)
    edge = float(le.group(1)) if le else None
    ttft, tpot = "sglang:time_to_first_token_seconds", "sglang:time_per_output_token_seconds"
    bumps = {
        "sglang:prompt_tokens_total": 1000,
        "sglang:generation_tokens_total": 2000,
        "sglang:num_running_reqs": 8,
        f"{ttft}_count": 2,
        f"{ttft}_sum": 3.5,
        f"{tpot}_count": 1000,
        f"{tpot}_sum": 90.0,
    }
    name = series.split("{", 1)[0]
    if name == f"{ttft}_bucket":
        return 2 if edge >= 2.5 else None
    if name == f"{tpot}_bucket":
        return 1000 if edge >= 0.1 else None
    return bumps.get(name)


# --- SGLang: push twice -----------------------------------------------------------------------


def test_telemetry_ingest_sglang_sample_first_push_is_a_baseline(db):
    deployment = _llama()

    result = _push_sample(deployment, "sglang_metrics_docs_example.prom", "sglang", 15)

    assert result.families == 12
    assert result.skipped == ()
    assert result.unknown_models == ()
    assert result.deployments == ("llama-8b@h100-a",)
    assert result.is_baseline is True
    row = EngineHourly.objects.get()
    assert (row.deployment, row.hour, row.intervals) == (deployment, HOUR, 0)
    assert (row.prompt_tokens, row.generation_tokens, row.requests) == (0, 0, 0)
    assert row.ttft_histogram["count"] == 0
    # Gauges are the current values, never diffed.
    assert (row.running_requests, row.waiting_requests, row.kv_cache_usage) == (162, 2826, 0.28)
    state = TelemetryPushState.objects.get(pool=deployment.pool, kind="sglang", source="default")
    assert state.state["replicas"][0]["generation_tokens"] == 7_557_572
    assert state.last_pushed_at == _at(15)


def test_telemetry_ingest_sglang_second_push_stores_exact_deltas(db):
    deployment = _llama()
    first = _sample("sglang_metrics_docs_example.prom")
    second = _bumped(first, _sglang_second_scrape)
    telemetry_ingest(text=first, kind="sglang", pool=deployment.pool, now=_at(15))

    result = telemetry_ingest(text=second, kind="sglang", pool=deployment.pool, now=_at(16))

    assert result.is_baseline is False
    row = EngineHourly.objects.get()
    assert row.intervals == 1
    assert row.prompt_tokens == 1000
    assert row.generation_tokens == 2000
    assert row.cached_prompt_tokens == 0  # this old release has no cached_tokens_total
    assert row.requests == 0  # ... nor num_requests_total
    ttft = dict(zip(row.ttft_histogram["le"], row.ttft_histogram["cumulative"], strict=True))
    assert (ttft["1.0"], ttft["2.5"], ttft["30.0"], ttft["+Inf"]) == (0, 2, 2, 2)
    assert row.ttft_histogram["count"] == 2
    assert row.ttft_histogram["sum"] == pytest.approx(3.5)
    tpot = dict(zip(row.tpot_histogram["le"], row.tpot_histogram["cumulative"], strict=True))
    assert (tpot["0.075"], tpot["0.1"], tpot["+Inf"]) == (0, 1000, 1000)
    assert row.tpot_family == "sglang:time_per_output_token_seconds"
    assert row.running_requests == 170
    assert row.last_observed_at == _at(16)

    # A third push with no change adds an interval and nothing else.
    telemetry_ingest(text=second, kind="sglang", pool=deployment.pool, now=_at(17))
    row.refresh_from_db()
    assert (row.intervals, row.generation_tokens, row.ttft_histogram["count"]) == (2, 2000, 2)


def test_slo_attainment_from_engine_interpolates_inside_the_bucket(db):
    deployment = _llama()  # SLO: TTFT 2,000 ms, TPOT 50 ms
    first = _sample("sglang_metrics_docs_example.prom")
    telemetry_ingest(text=first, kind="sglang", pool=deployment.pool, now=_at(15))
    telemetry_ingest(
        text=_bumped(first, _sglang_second_scrape),
        kind="sglang",
        pool=deployment.pool,
        now=_at(16),
    )

    slo = slo_attainment_from_engine(deployment=deployment, start=HOUR, end=_at(0, hour=11))

    # Both TTFTs lie in (1.0, 2.5]: 2.0 s is 2/3 of the way, so 2 x 2/3 of them are within.
    assert slo.ttft_requests == 2
    assert slo.ttft_share == pytest.approx(2 / 3)
    # Every TPOT lies in (0.075, 0.1] s, above 50 ms.
    assert (slo.tpot_requests, slo.tpot_share) == (1000, 0.0)
    assert slo.tpot_families == ("sglang:time_per_output_token_seconds",)


# --- vLLM: restart, via a scrape target -------------------------------------------------------


def test_scrape_target_vllm_restart_counts_from_zero(db):
    deployment = _llama()
    target = ScrapeTarget.objects.create(
        url="http://vllm-0:8000/metrics", kind="vllm", pool=deployment.pool
    )
    pages = iter(
        [_fixture("vllm_v1_synthetic.prom"), _fixture("vllm_v1_synthetic_after_restart.prom")]
    )

    first = scrape_target(target=target, now=_at(20), fetch=lambda url, timeout: next(pages))
    second = scrape_target(target=target, now=_at(21), fetch=lambda url, timeout: next(pages))

    assert first.is_ok and first.result.is_baseline
    assert second.is_ok and not second.result.is_baseline
    row = EngineHourly.objects.get(deployment=deployment, hour=HOUR)
    # Both engines dropped (45,000 -> 5,000 and 30,000 -> 3,000): the increase is the new values.
    assert row.generation_tokens == 8_000
    assert row.prompt_tokens == 16_000
    assert row.cached_prompt_tokens == 4_500
    assert (row.requests, row.aborted_requests) == (16, 1)
    after = parse_scrape(text=_fixture("vllm_v1_synthetic_after_restart.prom"), kind="vllm")
    assert row.ttft_histogram == histogram_to_json(after.engine(LLAMA_8B).ttft)
    assert row.tpot_family == "vllm:request_time_per_output_token_seconds"
    assert row.running_requests == 2  # 1 + 1, gauges never diffed
    assert row.gauges[f"target:{target.pk}"]["kv_cache_usage"] == pytest.approx(0.075)
    target.refresh_from_db()
    assert (target.last_status, target.consecutive_failures, target.last_error) == ("ok", 0, "")
    assert target.last_scraped_at == _at(21)
    assert {r["replica"] for r in target.state["replicas"]} == {"0", "1"}


def test_scrape_target_with_a_deployment_attributes_every_model_to_it(db):
    qwen = make_deployment(model="qwen-32b", pool="h100-a")  # no alias for the engine's name
    target = ScrapeTarget.objects.create(
        url="http://qwen-0:8000/metrics", kind="vllm", pool=qwen.pool, deployment=qwen
    )
    before = _fixture("vllm_v1_synthetic.prom")
    later = _bumped(before, lambda s: 50 if s.startswith("vllm:generation_tokens_total") else None)

    scrape_target(target=target, now=_at(5), fetch=lambda url, timeout: before)
    outcome = scrape_target(target=target, now=_at(6), fetch=lambda url, timeout: later)

    assert outcome.result.unknown_models == ()
    assert outcome.result.deployments == ("qwen-32b@h100-a",)
    assert EngineHourly.objects.get(deployment=qwen).generation_tokens == 100


def test_telemetry_ingest_unknown_model_is_reported_and_its_baseline_kept(db):
    other = make_deployment(model="qwen-32b", pool="h100-a")
    before = _fixture("vllm_v1_synthetic.prom")
    later = _bumped(before, lambda s: 500 if s.startswith("vllm:generation_tokens_total") else None)

    result = telemetry_ingest(text=before, kind="vllm", pool=other.pool, now=_at(20))

    assert result.unknown_models == (LLAMA_8B,)
    assert result.families > 0
    assert not EngineHourly.objects.exists()
    # The alias is added later: only the increase since the first push counts.
    llama = make_deployment(model="llama-8b", pool="h100-a", aliases=[LLAMA_8B])
    result = telemetry_ingest(text=later, kind="vllm", pool=other.pool, now=_at(21))
    assert result.unknown_models == ()
    assert EngineHourly.objects.get(deployment=llama).generation_tokens == 1000  # 2 engines


# --- DCGM ---------------------------------------------------------------------------------------


def test_telemetry_ingest_dcgm_sample_stores_gpu_hours_with_power(db):
    deployment = _llama()

    result = _push_sample(deployment, "dcgm_exporter_h100_sampled.prom", "dcgm", 30)

    assert (result.families, result.gpus, result.skipped) == (4, 8, ())
    rows = {row.gpu: row for row in GpuHourly.objects.filter(pool=deployment.pool, hour=HOUR)}
    assert sorted(rows) == ["0", "1", "2", "3", "4", "5", "6", "7"]
    gpu0 = rows["0"]
    assert gpu0.gpu_key == "GPU-c4529c8d-69c4-b61d-e0bc-7b2460096005"
    assert (gpu0.samples, gpu0.power_samples, gpu0.power_w_sum) == (1, 1, 113.611)
    assert gpu0.power_w_mean == 113.611
    assert (gpu0.utilisation_samples, gpu0.utilisation_pct_mean) == (1, 0)
    assert (gpu0.hostname, gpu0.model_name) == ("gpu-node-1", "NVIDIA H100 80GB HBM3")
    assert gpu0.pod == "vllm-agg-0-vllmdecodeworker-s65j5"
    assert rows["7"].power_w_sum == 66.997
    assert gpu0.energy_j == 0  # not in this excerpt
    (pool_hour,) = gpu_pool_hourly_list(pool=deployment.pool, start=HOUR, end=_at(0, hour=11))
    assert pool_hour.gpus_seen == 8
    powers = [113.611, 68.347, 65.709, 67.316, 68.717, 65.742, 67.328, 66.997]
    assert pool_hour.power_w_total_mean == pytest.approx(sum(powers))
    assert pool_hour.power_w_per_gpu_mean == pytest.approx(sum(powers) / 8)


def _dcgm_gpu0(*, energy_mj: int, xid: int, power_w: float) -> str:
    labels = (
        'gpu="0",UUID="GPU-c4529c8d-69c4-b61d-e0bc-7b2460096005",device="nvidia0",'
        'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1"'
    )
    return (
        "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
        f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{labels}}} {energy_mj}\n"
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
        f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {xid}\n"
        "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
        f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} {power_w}\n"
    )


def test_telemetry_ingest_dcgm_energy_delta_with_reset_and_xid_changes(db):
    pool = _llama().pool
    pushes = [
        (_at(1), _dcgm_gpu0(energy_mj=1_000_000, xid=0, power_w=100)),
        (_at(2), _dcgm_gpu0(energy_mj=1_500_500, xid=79, power_w=200)),
        (_at(3), _dcgm_gpu0(energy_mj=200_000, xid=79, power_w=300)),  # driver reload
        (_at(0, hour=11), _dcgm_gpu0(energy_mj=300_000, xid=79, power_w=400)),
    ]

    for now, text in pushes:
        telemetry_ingest(text=text, kind="dcgm", pool=pool, now=now)

    ten, eleven = GpuHourly.objects.filter(pool=pool).order_by("hour")
    # Baseline, then +500.5 J, then a reset: the new value (200 J) is the increase.
    assert ten.energy_j == Decimal("700.500")
    assert (ten.samples, ten.power_w_mean) == (3, 200)
    assert (ten.xid_last_code, ten.xid_changes) == (79, 1)
    assert eleven.energy_j == Decimal("100.000")
    assert (eleven.xid_last_code, eleven.xid_changes) == (79, 0)
    ten_agg, _ = gpu_pool_hourly_list(pool=pool, start=HOUR, end=_at(0, hour=12))
    assert (ten_agg.energy_j, ten_agg.gpus_with_xid) == (Decimal("700.500"), 1)


# --- scraping over HTTP -----------------------------------------------------------------------


def _sglang_target(metrics_server, pool) -> ScrapeTarget:
    """An SGLang target of `pool` scraping `metrics_server`, which serves the SGLang sample."""
    metrics_server.page = _sample("sglang_metrics_docs_example.prom")
    return ScrapeTarget.objects.create(
        url=f"http://127.0.0.1:{metrics_server.server_port}/metrics", kind="sglang", pool=pool
    )


def test_scrape_all_failing_target_is_marked_failed_and_the_job_does_not_raise(db, metrics_server):
    deployment = _llama()
    dead = ScrapeTarget.objects.create(
        url=f"http://127.0.0.1:{free_port()}/metrics",
        kind="vllm",
        pool=deployment.pool,
        timeout_s=2,
    )
    live = _sglang_target(metrics_server, deployment.pool)
    ScrapeTarget.objects.create(
        url="http://127.0.0.1:9/metrics", kind="dcgm", pool=deployment.pool, enabled=False
    )

    outcomes = scrape_all(now=_at(40))

    assert [(o.target_id, o.is_ok) for o in outcomes] == [(dead.pk, False), (live.pk, True)]
    dead.refresh_from_db()
    assert dead.last_status == "failed"
    assert dead.consecutive_failures == 1
    assert "Connection refused" in dead.last_error
    assert dead.last_error.startswith("URLError")
    assert dead.last_scraped_at == _at(40)
    live.refresh_from_db()
    assert (live.last_status, live.last_skipped, live.last_error) == ("ok", [], "")
    assert EngineHourly.objects.get(deployment=deployment).running_requests == 162

    scrape_targets_task()  # the beat's task: a thin call, never raises for a target

    dead.refresh_from_db()
    assert dead.consecutive_failures == 2
    health = {row.id: row for row in scrape_target_health(now=_at(41))}
    assert health[dead.pk].is_healthy is False
    assert health[dead.pk].consecutive_failures == 2
    assert health[live.pk].last_status == "ok"


def test_scrape_target_recovery_resets_consecutive_failures(db, metrics_server):
    deployment = _llama()
    target = _sglang_target(metrics_server, deployment.pool)

    def flaky(url: str, timeout: float) -> str:
        raise TimeoutError("timed out")

    failed = scrape_target(target=target, now=_at(1), fetch=flaky)
    recovered = scrape_target(target=target, now=_at(2))

    assert (failed.is_ok, failed.error) == (False, "TimeoutError: timed out")
    assert recovered.is_ok
    target.refresh_from_db()
    assert (target.last_status, target.consecutive_failures, target.last_error) == ("ok", 0, "")


# --- reconciliation -----------------------------------------------------------------------------


def _usage(tenant, deployment, hour: datetime, output_tokens: int) -> None:
    make_hourly_usage(tenant, deployment, hour, output_tokens=output_tokens)


def test_reconciliation_list_flags_beyond_tolerance_only(db, tenant_a, tenant_b):
    beyond = make_deployment(model="llama-8b", pool="h100-a")
    within = make_deployment(model="qwen-32b", pool="h100-a")
    for deployment in (beyond, within):
        EngineHourly.objects.create(
            deployment=deployment, hour=HOUR, intervals=120, generation_tokens=1_000_000
        )
    # Beyond: 15,000 apart > max(1% of 1,000,000, 10,000). Within: 9,000 apart.
    _usage(tenant_a, beyond, HOUR, 600_000)
    _usage(tenant_b, beyond, HOUR, 385_000)
    _usage(tenant_a, within, HOUR, 991_000)
    # No engine data: an hour with usage only, and an hour with baselines only.
    _usage(tenant_a, beyond, _at(0, hour=11), 5_000)
    EngineHourly.objects.create(deployment=within, hour=_at(0, hour=12), intervals=0)

    rows = reconciliation_list(start=HOUR, end=_at(0, hour=13))

    assert [(r.deployment, r.hour) for r in rows] == [
        ("llama-8b@h100-a", HOUR),
        ("qwen-32b@h100-a", HOUR),
    ]
    flagged, fine = rows
    assert (flagged.engine_output_tokens, flagged.metered_output_tokens) == (1_000_000, 985_000)
    assert (flagged.difference, flagged.is_flagged) == (15_000, True)
    assert (fine.difference, fine.is_flagged) == (9_000, False)
    assert (flagged.pool, flagged.model, flagged.intervals) == ("h100-a", "llama-8b", 120)


def test_reconciliation_list_tolerance_from_settings_and_arguments(db, tenant_a, settings):
    deployment = make_deployment(model="llama-8b", pool="h100-a")
    EngineHourly.objects.create(
        deployment=deployment, hour=HOUR, intervals=1, generation_tokens=1_000_000
    )
    _usage(tenant_a, deployment, HOUR, 985_000)
    window = {"start": HOUR, "end": _at(0, hour=11)}

    settings.RECONCILIATION_TOLERANCE_TOKENS = 20_000
    (by_settings,) = reconciliation_list(**window)
    (by_argument,) = reconciliation_list(
        **window, tolerance_tokens=0, tolerance_ratio=Decimal("0.02")
    )
    (strict,) = reconciliation_list(**window, tolerance_tokens=0, tolerance_ratio=Decimal("0.001"))

    assert by_settings.is_flagged is False
    assert by_argument.is_flagged is False  # 2% of 1,000,000 = 20,000 allowed
    assert strict.is_flagged is True


# --- the push endpoint and scrape targets API ---------------------------------------------------


def test_push_endpoint_ingest_token_stores_and_reports(db, users, token_client):
    deployment = _llama()
    client = token_client(users["operator"], scopes=("ingest",))

    response = client.post(
        f"{PUSH_URL}?kind=vllm&pool=h100-a",
        data=_fixture("vllm_v1_synthetic.prom"),
        content_type="text/plain; version=0.0.4",
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["skipped"] == []
    assert body["unknown_models"] == []
    assert body["families"] == len(
        parse_scrape(text=_fixture("vllm_v1_synthetic.prom"), kind="vllm").families
    )
    assert EngineHourly.objects.get(deployment=deployment).running_requests == 7


def test_push_endpoint_lists_skipped_families_and_unknown_models(db, users, token_client):
    _llama()
    client = token_client(users["operator"], scopes=("ingest",))
    text = (
        "# TYPE vllm:generation_tokens_total counter\n"
        'vllm:generation_tokens_total{model_name="mystery",engine="0"} 42.0\n'
        "# TYPE vllm:bad_histogram histogram\n"
        'vllm:bad_histogram_bucket{model_name="mystery",le="1.0"} 5.0\n'
    )

    response = client.post(
        f"{PUSH_URL}?kind=vllm&pool=h100-a", data=text, content_type="text/plain"
    )

    assert response.status_code == 200
    body = response.json()
    assert body["families"] == 1
    assert [item["family"] for item in body["skipped"]] == ["vllm:bad_histogram"]
    assert body["unknown_models"] == ["mystery"]


def _with_value(text: str, series: str, value: str) -> str:
    """The exposition with the sample of `series` (name and labels, as written) set to `value`."""
    lines = [
        f"{series} {value}" if line.startswith(f"{series} ") else line for line in text.splitlines()
    ]
    assert lines != text.splitlines(), series
    return "\n".join(lines) + "\n"


def test_push_endpoint_skips_infinite_samples_and_stores_the_rest(db, users, token_client):
    deployment = _llama()
    client = token_client(users["operator"], scopes=("ingest",))
    engine0, engine1 = (f'{{model_name="{LLAMA_8B}",engine="{n}"}}' for n in "01")
    ttft = "vllm:time_to_first_token_seconds"

    def push(text):
        return client.post(
            f"{PUSH_URL}?kind=vllm&pool=h100-a", data=text, content_type="text/plain"
        )

    def bump(series):  # 30 s on: +1,000 output tokens on engine 0, +500 prompt on engine 1,
        name = series.split("{", 1)[0]  # two more TTFT observations, of 3,000 s, on engine 0
        if series == f"vllm:generation_tokens_total{engine0}":
            return 1000
        if series == f"vllm:prompt_tokens_total{engine1}":
            return 500
        if name in (f"{ttft}_count", f"{ttft}_sum") and 'engine="0"' in series:
            return 2 if name.endswith("_count") else 6000.0
        if name == f"{ttft}_bucket" and 'engine="0"' in series and 'le="+Inf"' in series:
            return 2
        return None

    first = _fixture("vllm_v1_synthetic.prom")
    later = _bumped(first, bump)
    broken = _with_value(later, f"vllm:prompt_tokens_total{engine1}", "+Inf")
    broken = _with_value(broken, f"{ttft}_sum{engine0}", "+Inf")
    broken = _with_value(broken, f"vllm:num_requests_running{engine1}", "+Inf")
    assert push(first).status_code == 200

    response = push(broken)

    assert response.status_code == 200, response.content
    assert response.json()["skipped"] == [
        {
            "family": "vllm:prompt_tokens",
            "reason": f'series {{engine="1",model_name="{LLAMA_8B}"}}: counter value +Inf',
        },
        {
            "family": ttft,
            "reason": f'series {{engine="0",model_name="{LLAMA_8B}"}}: {ttft}_sum is +Inf',
        },
    ]
    row = EngineHourly.objects.get(deployment=deployment)
    assert (row.generation_tokens, row.prompt_tokens, row.ttft_histogram["count"]) == (1000, 0, 0)
    assert row.running_requests == 4  # engine 1's +Inf gauge is no reading; engine 0 has 4

    # The skipped series kept their previous values: the next push counts from them.
    assert push(later).json()["skipped"] == []
    row.refresh_from_db()
    assert (row.generation_tokens, row.prompt_tokens, row.ttft_histogram["count"]) == (1000, 500, 2)
    assert row.running_requests == 7


def test_push_endpoint_refuses_bad_requests_and_stores_nothing(db, users, token_client):
    _llama()
    ingest = token_client(users["operator"], scopes=("ingest",))
    text = _fixture("vllm_v1_synthetic.prom")

    too_large = ingest.post(
        f"{PUSH_URL}?kind=vllm&pool=h100-a",
        data="#" * (8 * 1024 * 1024 + 1),
        content_type="text/plain",
    )
    unknown_pool = ingest.post(
        f"{PUSH_URL}?kind=vllm&pool=nowhere", data=text, content_type="text/plain"
    )
    bad_kind = ingest.post(f"{PUSH_URL}?kind=tgi&pool=h100-a", data=text, content_type="text/plain")
    nul_pool = ingest.post(
        f"{PUSH_URL}?kind=vllm&pool=h100%00a", data=text, content_type="text/plain"
    )
    read_only = token_client(users["operator"], scopes=("read",)).post(
        f"{PUSH_URL}?kind=vllm&pool=h100-a", data=text, content_type="text/plain"
    )
    json_body = ingest.post(
        f"{PUSH_URL}?kind=tgi&pool=h100-a", data=text, content_type="application/json"
    )

    assert too_large.status_code == 413
    assert unknown_pool.status_code == 400
    assert unknown_pool.json()["errors"] == [{"field": "pool", "message": "no pool 'nowhere'"}]
    assert bad_kind.status_code == 400
    assert [e["field"] for e in bad_kind.json()["errors"]] == ["kind"]
    assert nul_pool.status_code == 400
    assert nul_pool.json()["errors"] == [
        {"field": "pool", "message": "must not contain NUL (U+0000) characters"}
    ]
    assert read_only.status_code == 403
    assert json_body.status_code == 415  # before the query's 400
    assert json_body.json()["errors"] == [
        {"field": "Content-Type", "message": "must be text/plain (got 'application/json')"}
    ]
    assert not EngineHourly.objects.exists()
    assert not TelemetryPushState.objects.exists()


def test_scrape_targets_api_operators_write_finance_reads_investor_refused(
    db, users, token_client, session_client
):
    deployment = _llama()
    admin = token_client(users["operator"], scopes=("admin", "read"))

    created = admin.post(
        "/api/v1/scrape-targets",
        {"url": "http://vllm-0:8000/metrics", "kind": "vllm", "pool": "h100-a"},
    )
    dcgm_with_deployment = admin.post(
        "/api/v1/scrape-targets",
        {
            "url": "http://node-1:9400/metrics",
            "kind": "dcgm",
            "pool": "h100-a",
            "deployment": deployment.slug,
        },
    )
    finance_list = token_client(users["finance"]).get("/api/v1/scrape-targets")
    finance_write = token_client(users["finance"], scopes=("read",)).post(
        "/api/v1/scrape-targets",
        {"url": "http://vllm-1:8000/metrics", "kind": "vllm", "pool": "h100-a"},
    )
    investor_list = session_client(users["investor"]).get("/api/v1/scrape-targets")

    assert created.status_code == 201, created.content
    assert created.json()["last_status"] == "never"
    assert "state" not in created.json()
    assert dcgm_with_deployment.status_code == 400
    assert [e["field"] for e in dcgm_with_deployment.json()["errors"]] == ["deployment"]
    assert finance_list.status_code == 200
    assert [t["url"] for t in finance_list.json()["results"]] == ["http://vllm-0:8000/metrics"]
    assert finance_write.status_code == 403
    assert investor_list.status_code == 403
    assert ScrapeTarget.objects.count() == 1


def test_scrape_targets_api_new_url_restarts_from_a_baseline(db, users, token_client):
    pool = _llama().pool
    target = ScrapeTarget.objects.create(
        url="http://vllm-0:8000/metrics", kind="vllm", pool=pool, state={"replicas": [1]}
    )
    admin = token_client(users["operator"], scopes=("admin",))

    disabled = admin.patch(f"/api/v1/scrape-targets/{target.pk}", {"enabled": False})
    target.refresh_from_db()
    state_after_disable = target.state
    moved = admin.patch(
        f"/api/v1/scrape-targets/{target.pk}", {"url": "http://vllm-9:8000/metrics"}
    )
    target.refresh_from_db()

    assert (disabled.status_code, moved.status_code) == (200, 200)
    assert state_after_disable == {"replicas": [1]}
    assert (target.url, target.enabled, target.state) == ("http://vllm-9:8000/metrics", False, {})


# --- concurrency (PostgreSQL) -----------------------------------------------------------------


@pytest.mark.postgres_only
def test_telemetry_ingest_concurrent_sources_add_every_increase(transactional_db):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's")
    deployment = _llama()
    base = _fixture("vllm_v1_synthetic.prom")
    rounds, sources = 8, ("engine-a", "engine-b", "engine-c")

    def push(source: str) -> None:
        for step in range(rounds + 1):  # step 0 is the baseline
            text = _bumped(
                base,
                lambda s, step=step: (
                    100 * step if s.startswith("vllm:generation_tokens_total") else None
                ),
            )
            telemetry_ingest(
                text=text, kind="vllm", pool=deployment.pool, now=_at(step), source=source
            )

    _, errors = run_together(push, sources, timeout=60)  # the thread's traceback is lost

    assert errors == []
    row = EngineHourly.objects.get(deployment=deployment)
    # Each source: 2 engines x 100 tokens per round, 8 rounds.
    assert row.generation_tokens == len(sources) * rounds * 200
    assert row.intervals == len(sources) * rounds
    assert set(row.gauges) == {f"push:{source}" for source in sources}
    assert row.running_requests == 7 * len(sources)


def test_soft_time_limit_drops_the_fetches_not_started(db):
    """Celery raises SoftTimeLimitExceeded in the task's thread while it waits for the
    fetches; the targets not fetched yet are dropped, not fetched one by one first."""
    deployment = _llama()
    for port in range(9000, 9040):
        ScrapeTarget.objects.create(
            url=f"http://127.0.0.1:{port}/metrics", kind="vllm", pool=deployment.pool
        )
    fetched = []

    def slow_fetch(url: str, timeout: float) -> str:
        fetched.append(url)
        time.sleep(0.2)
        raise OSError("unreachable")

    def soft_limit(signum, frame):
        raise SoftTimeLimitExceeded()

    # As Celery's pool does: SIGUSR1 to the process, whose handler raises in the main thread.
    previous = signal.signal(signal.SIGUSR1, soft_limit)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1))
    began = time.monotonic()
    timer.start()
    try:
        with pytest.raises(SoftTimeLimitExceeded):
            scrape_all(now=_at(40), fetch=slow_fetch, max_workers=2)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)

    # Two workers, 0.2 s a fetch: all 40 would take 4 s.
    assert time.monotonic() - began < 1.5
    assert len(fetched) <= 6


# --- NVIDIA Dynamo's frontend (data-formats.md 6c): an engine kind beside vLLM and SGLang ---


def test_dynamo_frontend_metrics_parse_as_an_engine():
    scrape = parse_scrape(text=_fixture("dynamo_frontend_synthetic.prom"), kind="dynamo")

    assert scrape.skipped == ()
    [engine] = scrape.engines
    assert engine.model_name == "llama-3.3-70b"
    # token counters: the sums of the sequence-length histograms
    assert (engine.prompt_tokens, engine.generation_tokens) == (1_500_000, 300_000)
    assert (engine.requests_total, engine.requests_aborted) == (1200, 10)
    assert (engine.running_requests, engine.waiting_requests) == (42, 3)
    assert engine.kv_cache_usage == 0.37  # a 0-1 ratio despite "percent"
    assert (engine.ttft.count, engine.ttft.sum) == (1190, 380.5)
    assert engine.tpot_family == "dynamo_frontend_inter_token_latency_seconds"


def _dynamo_second_scrape(series: str) -> float | None:
    """200 more requests: 250,000 input and 60,000 output tokens, 4 of them failed."""
    bumps = {
        'dynamo_frontend_requests_total{endpoint="chat_completions",model="llama-3.3-70b",'
        'request_type="stream",status="success"}': 196,
        'dynamo_frontend_requests_total{endpoint="chat_completions",model="llama-3.3-70b",'
        'request_type="stream",status="error"}': 4,
        'dynamo_frontend_input_sequence_tokens_sum{model="llama-3.3-70b"}': 250_000,
        'dynamo_frontend_output_sequence_tokens_sum{model="llama-3.3-70b"}': 60_000,
    }
    return bumps.get(series)


def test_dynamo_pushes_store_exact_deltas_and_reconcile_with_usage(db, tenant_a):
    deployment = make_deployment(model="llama-3.3-70b", pool="h100-a")
    first = _fixture("dynamo_frontend_synthetic.prom")
    telemetry_ingest(text=first, kind="dynamo", pool=deployment.pool, now=_at(15))
    telemetry_ingest(
        text=_bumped(first, _dynamo_second_scrape), kind="dynamo", pool=deployment.pool,
        now=_at(16),
    )  # fmt: skip

    row = EngineHourly.objects.get()
    assert (row.prompt_tokens, row.generation_tokens, row.requests, row.aborted_requests) == (
        250_000, 60_000, 200, 4,
    )  # fmt: skip
    assert (row.running_requests, row.kv_cache_usage) == (42, 0.37)
    _usage(tenant_a, deployment, HOUR, 60_000)
    [hour] = reconciliation_list(start=HOUR, end=_at(0, hour=11))
    assert (hour.engine_output_tokens, hour.metered_output_tokens, hour.is_flagged) == (
        60_000, 60_000, False,
    )  # fmt: skip
