"""Prometheus telemetry layer, on the real samples in shared/samples and synthetic V1 fixtures."""

import math
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from metering.domain.telemetry.counters import counter_delta, reconciliation_flag
from metering.domain.telemetry.dcgm import (
    DCGM_DEFAULT_FIELD_TYPES,
    DCGM_KNOWN_FIELD_TYPES,
    dcgm_field_types,
)
from metering.domain.telemetry.engines import EngineStats, engine_deltas
from metering.domain.telemetry.histograms import (
    Histogram,
    histogram_delta,
    histogram_sum,
    quantile,
    share_within,
)
from metering.domain.telemetry.parse import parse_scrape

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "samples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
QWEN_CODER = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
INF = math.inf


def _sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def _sglang_sample_engine() -> EngineStats:
    scrape = parse_scrape(text=_sample("sglang_metrics_docs_example.prom"), kind="sglang")
    return scrape.engine(LLAMA_8B)


def _bucket(histogram: Histogram, edge: float) -> float:
    return dict(histogram.buckets)[edge]


# --- SGLang sample (older release: model_name only, old TPOT name) ----------------------


def test_parse_scrape_sglang_sample_keeps_all_12_families_and_91_samples():
    scrape = parse_scrape(text=_sample("sglang_metrics_docs_example.prom"), kind="sglang")

    assert len(scrape.families) == 12
    assert sum(len(family.samples) for family in scrape.families) == 91
    assert scrape.skipped == ()
    assert scrape.family("sglang:prompt_tokens").type == "counter"
    assert scrape.family("sglang:func_latency_seconds").type == "histogram"


def test_parse_scrape_sglang_sample_normalises_counters_and_gauges():
    engine = _sglang_sample_engine()

    assert engine.replica is None
    assert engine.prompt_tokens == 8_128_902
    assert engine.generation_tokens == 7_557_572
    assert engine.running_requests == 162
    assert engine.waiting_requests == 2826
    assert engine.kv_cache_usage == 0.28
    # This old release exposes neither cached_tokens_total nor num_requests_total.
    assert engine.cached_prompt_tokens is None
    assert engine.requests_total is None


def test_parse_scrape_sglang_sample_reads_histograms_and_old_tpot_name():
    engine = _sglang_sample_engine()

    assert engine.ttft.count == 11008
    assert engine.ttft.sum == 2.3518979474117756e06
    assert _bucket(engine.ttft, 2.5) == 140
    assert engine.ttft.buckets[-1] == (INF, 11008)
    assert engine.tpot_family == "sglang:time_per_output_token_seconds"
    assert _bucket(engine.tpot, 0.1) == 4_950_195
    assert engine.tpot.count == 7_400_757
    assert engine.e2e_latency.count == 11228
    assert _bucket(engine.e2e_latency, 60.0) == 1513


def test_share_within_sglang_ttft_interpolates_inside_1_to_2_5_bucket():
    ttft = _sglang_sample_engine().ttft

    # le=1.0 -> 27, le=2.5 -> 140: 2.0 s is 2/3 of the way, 27 + 113 * (1.0 / 1.5).
    assert share_within(histogram=ttft, threshold_s=2.0) == pytest.approx(
        (27 + 113 * (1.0 / 1.5)) / 11008
    )
    assert share_within(histogram=ttft, threshold_s=2.5) == pytest.approx(140 / 11008)
    # Past the last finite edge (30 s) the +Inf bucket cannot be split: it counts as above.
    assert share_within(histogram=ttft, threshold_s=60.0) == pytest.approx(2513 / 11008)


def test_quantile_sglang_tpot_p50_by_hand():
    tpot = _sglang_sample_engine().tpot

    # rank 0.5 * 7,400,757 = 3,700,378.5 falls in (0.075, 0.1]: 433,413 -> 4,950,195.
    expected = 0.075 + 0.025 * (3_700_378.5 - 433_413) / (4_950_195 - 433_413)
    assert quantile(histogram=tpot, q=0.5) == pytest.approx(expected)


# --- vLLM V0 sample (truncated inside iteration_tokens_total) ---------------------------


def test_parse_scrape_vllm_v0_skips_truncated_histogram_and_keeps_the_rest():
    scrape = parse_scrape(text=_sample("vllm_v0_metrics_aibrix_docs_excerpt.prom"), kind="vllm")

    assert [name for name, _ in scrape.skipped] == ["vllm:iteration_tokens_total"]
    reason = scrape.skipped[0][1]
    assert "no +Inf bucket" in reason
    assert "no _count" in reason
    assert scrape.family("vllm:iteration_tokens_total") is None
    assert len(scrape.families) == 13
    assert sum(len(family.samples) for family in scrape.families) == 13
    assert scrape.family("vllm:num_requests_swapped").samples[0].value == 0.0
    lora = scrape.family("vllm:lora_requests_info").samples[0]
    assert lora.value == 1.7382173358407154e09
    assert lora.labels["max_lora"] == "0"


def test_parse_scrape_vllm_v0_normalises_legacy_names():
    scrape = parse_scrape(text=_sample("vllm_v0_metrics_aibrix_docs_excerpt.prom"), kind="vllm")
    engine = scrape.engine(QWEN_CODER)

    assert [stats.replica for stats in scrape.replicas] == [""]  # V0 has no engine label
    assert engine.prompt_tokens == 148
    assert engine.generation_tokens == 955
    assert dict(engine.requests_by_reason) == {"stop": 4}
    assert engine.requests_total == 4
    assert engine.requests_aborted == 0
    assert engine.kv_cache_usage == 0.0  # from gpu_cache_usage_perc
    assert engine.running_requests == 0
    assert engine.ttft is None


# --- DCGM sample (no HELP/TYPE lines, `Hostname` label) ----------------------------------


def test_parse_scrape_dcgm_sample_types_lines_from_csv_and_reads_each_gpu():
    scrape = parse_scrape(text=_sample("dcgm_exporter_h100_sampled.prom"), kind="dcgm")

    assert scrape.skipped == ()
    assert [family.name for family in scrape.families] == [
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
    ]
    assert {family.type for family in scrape.families} == {"gauge"}
    assert sum(len(family.samples) for family in scrape.families) == 30
    assert [gpu.gpu for gpu in scrape.gpus] == ["0", "1", "2", "3", "4", "5", "6", "7"]

    gpu0 = scrape.gpu("0")
    assert gpu0.uuid == "GPU-c4529c8d-69c4-b61d-e0bc-7b2460096005"
    assert gpu0.power_w == 113.611
    assert gpu0.hostname == "gpu-node-1"
    assert gpu0.model_name == "NVIDIA H100 80GB HBM3"
    assert gpu0.temperature_c == 30
    assert gpu0.utilisation_pct == 0
    assert (gpu0.pod, gpu0.namespace) == ("vllm-agg-0-vllmdecodeworker-s65j5", "dynamo-workload")
    assert gpu0.energy_mj is None  # not in this grep-filtered excerpt

    gpu7 = scrape.gpu("7")
    assert gpu7.power_w == 66.997
    assert gpu7.pod is None
    assert "DCGM_FI_DEV_MEM_COPY_UTIL" not in gpu7.fields  # the source cut it after GPU 5
    assert scrape.gpu("5").fields["DCGM_FI_DEV_MEM_COPY_UTIL"] == 0


def test_parse_scrape_dcgm_line_without_type_and_unknown_field_is_skipped():
    scrape = parse_scrape(
        text=_sample("dcgm_exporter_h100_sampled.prom"),
        kind="dcgm",
        field_types={"DCGM_FI_DEV_POWER_USAGE": "gauge"},
    )

    assert [family.name for family in scrape.families] == ["DCGM_FI_DEV_POWER_USAGE"]
    assert [name for name, _ in scrape.skipped] == [
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
    ]
    assert scrape.gpu("3").power_w == 67.316
    assert scrape.gpu("3").temperature_c is None


def test_parse_scrape_dcgm_lowercase_hostname_counter_and_sentinel():
    # A GPU-0 line of the sample, relabelled as after dcgm-exporter PR #655 (`hostname`),
    # with TYPE lines as the exporter writes them and a sentinel for an unsupported field.
    labels = (
        'gpu="0",UUID="GPU-c4529c8d-69c4-b61d-e0bc-7b2460096005",device="nvidia0",'
        'modelName="NVIDIA H100 80GB HBM3",hostname="gpu-node-1"'
    )
    text = (
        "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).\n"
        "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
        f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{labels}}} 123456789\n"
        "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n"
        "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
        f"DCGM_FI_DEV_FB_USED{{{labels}}} 9223372036854775794\n"
        "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
        f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} 79\n"
    )

    gpu = parse_scrape(text=text, kind="dcgm").gpu("0")

    assert gpu.hostname == "gpu-node-1"
    assert gpu.energy_mj == 123_456_789
    assert gpu.xid_last_code == 79
    assert gpu.fb_used_mib is None


def test_dcgm_field_types_default_csv_leaves_sm_active_disabled():
    types = dcgm_field_types(csv_text=_sample("dcgm_exporter_default-counters.csv"))

    assert len(types) == 26
    assert "DCGM_FI_PROF_SM_ACTIVE" not in types
    assert "DCGM_FI_PROF_SM_OCCUPANCY" not in types
    assert types["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"
    assert types["DCGM_FI_DEV_XID_ERRORS"] == "gauge"
    assert types["DCGM_FI_DEV_DEC_UTIL"] == "gauge"  # "DCGM_FI_DEV_DEC_UTIL ," in the CSV
    assert types["DCGM_FI_DRIVER_VERSION"] == "label"
    assert types["DCGM_FI_PROF_PCIE_TX_BYTES"] == "gauge"


def test_dcgm_field_types_include_disabled_lets_enabled_line_win():
    types = dcgm_field_types(
        csv_text=_sample("dcgm_exporter_default-counters.csv"), include_disabled=True
    )

    assert types["DCGM_FI_PROF_SM_ACTIVE"] == "gauge"
    assert types["DCGM_EXP_XID_ERRORS_COUNT"] == "counter"
    # Listed commented out as counter and enabled as gauge: the enabled line wins.
    assert types["DCGM_FI_PROF_PCIE_TX_BYTES"] == "gauge"


def test_dcgm_embedded_field_types_match_the_csv():
    default_csv = _sample("dcgm_exporter_default-counters.csv")

    assert dict(DCGM_DEFAULT_FIELD_TYPES) == dcgm_field_types(csv_text=default_csv)
    assert dict(DCGM_KNOWN_FIELD_TYPES) == dcgm_field_types(
        csv_text=default_csv, include_disabled=True
    )
    assert dcgm_field_types(
        csv_text=_sample("dcgm_exporter_dcp-metrics-included.csv")
    ) == dcgm_field_types(csv_text=default_csv)


# --- Synthetic vLLM V1 fixtures -------------------------------------------------------


def test_parse_scrape_vllm_v1_sums_over_engine():
    scrape = parse_scrape(text=_fixture("vllm_v1_synthetic.prom"), kind="vllm")
    engine = scrape.engine(LLAMA_8B)

    assert scrape.skipped == ()
    assert [(s.replica, s.generation_tokens) for s in scrape.replicas] == [
        ("0", 45_000),
        ("1", 30_000),
    ]
    assert engine.prompt_tokens == 200_000  # 120,000 + 80,000
    assert engine.generation_tokens == 75_000  # 45,000 + 30,000
    assert engine.cached_prompt_tokens == 50_000  # source="local_cache_hit": 30,000 + 20,000
    assert dict(engine.requests_by_reason) == {
        "stop": 170,
        "length": 23,
        "abort": 7,
        "error": 0,
        "repetition": 0,
    }
    assert engine.requests_total == 200
    assert engine.requests_aborted == 7
    assert engine.running_requests == 7  # 4 + 3
    assert engine.waiting_requests == 2  # 2 + 0
    assert engine.kv_cache_usage == 0.375  # mean of 0.5 and 0.25, not their sum
    assert engine.tpot_family == "vllm:request_time_per_output_token_seconds"
    assert _bucket(engine.ttft, 1.0) == 150  # 90 + 60
    assert _bucket(engine.ttft, 2.5) == 192  # 114 + 78
    assert engine.ttft.count == 200
    assert engine.ttft.sum == pytest.approx(176.0)  # 105.6 + 70.4
    assert len(engine.ttft.buckets) == 23  # 22 default edges + +Inf


def test_share_within_vllm_ttft_slo_2s_has_no_edge_and_is_interpolated():
    ttft = parse_scrape(text=_fixture("vllm_v1_synthetic.prom"), kind="vllm").engine(LLAMA_8B).ttft

    assert 2.0 not in ttft.edges
    # (150 + (192 - 150) * (2.0 - 1.0) / (2.5 - 1.0)) / 200 = (150 + 28) / 200
    assert share_within(histogram=ttft, threshold_s=2.0) == pytest.approx(0.89)


def test_quantile_vllm_ttft_p50_and_p95_by_hand():
    ttft = parse_scrape(text=_fixture("vllm_v1_synthetic.prom"), kind="vllm").engine(LLAMA_8B).ttft

    # p50: rank 100 in (0.25, 0.5]: 70 -> 105. p95: rank 190 in (1, 2.5]: 150 -> 192.
    assert quantile(histogram=ttft, q=0.5) == pytest.approx(0.25 + 0.25 * 30 / 35)
    assert quantile(histogram=ttft, q=0.95) == pytest.approx(1.0 + 1.5 * 40 / 42)


def test_engine_deltas_vllm_restart_counts_from_zero_not_negative():
    before = parse_scrape(text=_fixture("vllm_v1_synthetic.prom"), kind="vllm")
    after = parse_scrape(text=_fixture("vllm_v1_synthetic_after_restart.prom"), kind="vllm")

    (increase,) = engine_deltas(previous=before.replicas, current=after.replicas)

    # Both engines dropped (45,000 -> 5,000 and 30,000 -> 3,000): increase = the new values.
    assert increase.generation_tokens == 8_000
    assert increase.prompt_tokens == 16_000
    assert increase.cached_prompt_tokens == 4_500
    assert increase.requests_total == 16
    assert increase.requests_aborted == 1
    assert increase.ttft == after.engine(LLAMA_8B).ttft
    assert increase.running_requests == 2  # gauges are current values, never diffed
    assert counter_delta(previous=45_000, current=5_000) == 5_000


def test_engine_deltas_steady_scrapes_sum_per_engine_increments():
    before = parse_scrape(text=_fixture("vllm_v1_synthetic.prom"), kind="vllm")

    (unchanged,) = engine_deltas(previous=before.replicas, current=before.replicas)
    (baseline,) = engine_deltas(previous=(), current=before.replicas)

    assert unchanged.generation_tokens == 0
    assert unchanged.ttft.count == 0
    assert baseline.generation_tokens == 0  # first observation is the baseline
    assert baseline.ttft.count == 0


def test_engine_deltas_one_engine_restart_resets_only_its_share():
    def replica(engine: str, generation_tokens: float) -> EngineStats:
        return EngineStats(model_name=LLAMA_8B, replica=engine, generation_tokens=generation_tokens)

    previous = [replica("0", 45_000), replica("1", 30_000)]
    current = [replica("0", 5_000), replica("1", 31_000)]  # engine 0 restarted

    (increase,) = engine_deltas(previous=previous, current=current)

    assert increase.generation_tokens == 6_000  # 5,000 after the reset + 1,000
    # Diffing the per-model sums instead (75,000 -> 36,000) would report 36,000.
    assert counter_delta(previous=75_000, current=36_000) == 36_000


def test_parse_scrape_sglang_sums_dp_rank_and_streaming_keeps_tp_rank_0():
    # Built from data-formats.md §2 (new SGLang labels), not a real dump.
    base = f'model_name="{LLAMA_8B}",engine_type="unified"'
    text = (
        "# TYPE sglang:prompt_tokens_total counter\n"
        f'sglang:prompt_tokens_total{{{base},is_streaming="true"}} 100\n'
        f'sglang:prompt_tokens_total{{{base},is_streaming="false"}} 50\n'
        "# TYPE sglang:num_running_reqs gauge\n"
        f'sglang:num_running_reqs{{{base},tp_rank="0",pp_rank="0",dp_rank="0"}} 4\n'
        f'sglang:num_running_reqs{{{base},tp_rank="1",pp_rank="0",dp_rank="0"}} 4\n'
        f'sglang:num_running_reqs{{{base},tp_rank="0",pp_rank="0",dp_rank="1"}} 6\n'
        f'sglang:num_running_reqs{{{base},tp_rank="1",pp_rank="0",dp_rank="1"}} 6\n'
        "# TYPE sglang:cached_tokens_total counter\n"
        f'sglang:cached_tokens_total{{{base},cache_source="device"}} 30\n'
        f'sglang:cached_tokens_total{{{base},cache_source="host"}} 10\n'
        f'sglang:cached_tokens_total{{{base},cache_source="total"}} 40\n'
        "# TYPE sglang:num_requests_total counter\n"
        f'sglang:num_requests_total{{{base},is_streaming="true"}} 3\n'
        f'sglang:num_requests_total{{{base},is_streaming="false"}} 2\n'
    )

    engine = parse_scrape(text=text, kind="sglang").engine(LLAMA_8B)

    assert engine.prompt_tokens == 150
    assert engine.running_requests == 10  # dp_rank 0 + 1, tp_rank 1 ignored
    assert engine.cached_prompt_tokens == 40  # the "total" series, not 30 + 10 + 40
    assert engine.requests_total == 5


# --- Per-family robustness ----------------------------------------------------------------


def test_parse_scrape_malformed_families_do_not_lose_the_others():
    text = (
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m",engine="0"} 3.0\n'
        "# TYPE vllm:broken_line gauge\n"
        'vllm:broken_line{model_name="m" 1.0\n'
        "# TYPE vllm:odd_type wibble\n"
        'vllm:odd_type{model_name="m"} 1.0\n'
        "# TYPE vllm:bad_histogram histogram\n"
        'vllm:bad_histogram_bucket{model_name="m",le="1.0"} 5.0\n'
        'vllm:bad_histogram_bucket{model_name="m",le="+Inf"} 4.0\n'
        'vllm:bad_histogram_count{model_name="m"} 4.0\n'
        'vllm:bad_histogram_sum{model_name="m"} 2.0\n'
        "# TYPE vllm:generation_tokens_total counter\n"
        'vllm:generation_tokens_total{model_name="m",engine="0"} 42.0\n'
    )
    with pytest.raises(ValueError):
        list(text_string_to_metric_families(text))

    scrape = parse_scrape(text=text, kind="vllm")

    assert [family.name for family in scrape.families] == [
        "vllm:num_requests_running",
        "vllm:generation_tokens",
    ]
    assert [name for name, _ in scrape.skipped] == [
        "vllm:broken_line",
        "vllm:odd_type",
        "vllm:bad_histogram",
    ]
    assert "not cumulative" in scrape.skipped[2][1]
    assert scrape.engine("m").generation_tokens == 42
    assert scrape.engine("m").running_requests == 3


@pytest.mark.parametrize("value", ["+Inf", "-Inf", "NaN"])
def test_parse_scrape_skips_families_with_non_finite_values_and_keeps_the_rest(value):
    h = "vllm:e2e_request_latency_seconds"
    text = (
        "# TYPE vllm:generation_tokens_total counter\n"
        f'vllm:generation_tokens_total{{model_name="m",engine="0"}} {value}\n'
        "# TYPE vllm:prompt_tokens_total counter\n"
        'vllm:prompt_tokens_total{model_name="m",engine="0"} 42.0\n'
        f"# TYPE {h} histogram\n"
        f'{h}_bucket{{model_name="m",engine="0",le="1.0"}} 1.0\n'
        f'{h}_bucket{{model_name="m",engine="0",le="+Inf"}} 2.0\n'
        f'{h}_count{{model_name="m",engine="0"}} 2.0\n'
        f'{h}_sum{{model_name="m",engine="0"}} {value}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{model_name="m",engine="0"}} {value}\n'
        f'vllm:num_requests_running{{model_name="m",engine="1"}} 3.0\n'
    )

    scrape = parse_scrape(text=text, kind="vllm")

    assert scrape.skipped == (
        ("vllm:generation_tokens", f'series {{engine="0",model_name="m"}}: counter value {value}'),
        (h, f'series {{engine="0",model_name="m"}}: {h}_sum is {value}'),
    )
    assert [family.name for family in scrape.families] == [
        "vllm:prompt_tokens",
        "vllm:num_requests_running",
    ]
    engine = scrape.engine("m")
    assert (engine.prompt_tokens, engine.generation_tokens, engine.e2e_latency) == (42, None, None)
    assert engine.running_requests == 3  # a gauge that is not finite is no reading


def test_parse_scrape_dcgm_drops_an_infinite_gauge_like_a_sentinel():
    text = (
        "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-0"} -Inf\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-1"} 300.5\n'
    )

    scrape = parse_scrape(text=text, kind="dcgm")

    assert scrape.skipped == ()
    assert [(g.gpu, g.power_w) for g in scrape.gpus] == [("1", 300.5)]


# --- Pure helpers ----------------------------------------------------------------------


def test_counter_delta_baseline_increase_and_reset():
    assert counter_delta(previous=None, current=1_000) == 0.0
    assert counter_delta(previous=1_000, current=1_250) == 250
    assert counter_delta(previous=1_000, current=1_000) == 0
    assert counter_delta(previous=1_000, current=40) == 40
    with pytest.raises(ValueError):
        counter_delta(previous=1_000, current=-1)


HIST_A = Histogram(buckets=((0.1, 2.0), (1.0, 5.0), (INF, 6.0)), sum=3.0, count=6.0)
HIST_B = Histogram(buckets=((0.1, 3.0), (1.0, 9.0), (INF, 11.0)), sum=7.5, count=11.0)


def test_histogram_delta_bucket_wise_baseline_and_reset():
    assert histogram_delta(previous=HIST_A, current=HIST_B) == Histogram(
        buckets=((0.1, 1.0), (1.0, 4.0), (INF, 5.0)), sum=4.5, count=5.0
    )
    assert histogram_delta(previous=None, current=HIST_A) == Histogram(
        buckets=((0.1, 0.0), (1.0, 0.0), (INF, 0.0)), sum=0.0, count=0.0
    )
    assert histogram_delta(previous=HIST_B, current=HIST_A) == HIST_A  # restart
    rebucketed = Histogram(buckets=((0.5, 7.0), (INF, 12.0)), sum=8.0, count=12.0)
    assert histogram_delta(previous=HIST_A, current=rebucketed) == rebucketed


def test_histogram_sum_uses_common_edges():
    extra_edge = Histogram(buckets=((0.1, 1.0), (0.5, 2.0), (1.0, 4.0), (INF, 4.0)), sum=1, count=4)

    assert histogram_sum(histograms=[HIST_A, extra_edge]) == Histogram(
        buckets=((0.1, 3.0), (1.0, 9.0), (INF, 10.0)), sum=4.0, count=10.0
    )


def test_share_within_and_quantile_edge_cases():
    empty = Histogram(buckets=((1.0, 0.0), (INF, 0.0)), sum=0.0, count=0.0)

    # First bucket's lower edge is 0: 0.05 s is half of (0, 0.1] holding 2 of 6.
    assert share_within(histogram=HIST_A, threshold_s=0.05) == pytest.approx(1 / 6)
    assert share_within(histogram=HIST_A, threshold_s=1.0) == pytest.approx(5 / 6)
    assert share_within(histogram=empty, threshold_s=1.0) is None
    assert quantile(histogram=empty, q=0.5) is None
    assert quantile(histogram=HIST_A, q=0.25) == pytest.approx(0.1 * 1.5 / 2)
    assert quantile(histogram=HIST_A, q=0.99) == 1.0  # in +Inf: the last finite edge
    with pytest.raises(ValueError):
        quantile(histogram=HIST_A, q=1.5)


def test_reconciliation_flag_at_its_boundary():
    # Small volumes: the 10,000-token floor applies.
    assert not reconciliation_flag(engine_output_tokens=100_000, metered_output_tokens=90_000)
    assert reconciliation_flag(engine_output_tokens=100_000, metered_output_tokens=89_999)
    # Large volumes: 1 % of the larger total (2,000,000 -> 20,000 tokens) applies.
    assert not reconciliation_flag(engine_output_tokens=2_000_000, metered_output_tokens=1_980_000)
    assert reconciliation_flag(engine_output_tokens=2_000_000, metered_output_tokens=1_979_999)
    assert not reconciliation_flag(engine_output_tokens=1_980_000, metered_output_tokens=2_000_000)
