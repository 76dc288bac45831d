"""NVIDIA dcgm-exporter: field types from its CSV, and per-GPU normalisation.

Pure: no Django. Semantics follow data-formats.md §3.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from metering.domain.telemetry.exposition import Family, family_values

# FIELD -> Prometheus type of the fields enabled in dcgm-exporter's
# etc/default-counters.csv @ d5e5f51. Copied, not read at run time: shared/ is not shipped.
DCGM_DEFAULT_FIELD_TYPES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "DCGM_FI_DEV_SM_CLOCK": "gauge",
        "DCGM_FI_DEV_MEM_CLOCK": "gauge",
        "DCGM_FI_DEV_MEMORY_TEMP": "gauge",
        "DCGM_FI_DEV_GPU_TEMP": "gauge",
        "DCGM_FI_DEV_POWER_USAGE": "gauge",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "counter",
        "DCGM_FI_DEV_GPU_UTIL": "gauge",
        "DCGM_FI_DEV_MEM_COPY_UTIL": "gauge",
        "DCGM_FI_DEV_ENC_UTIL": "gauge",
        "DCGM_FI_DEV_DEC_UTIL": "gauge",
        "DCGM_FI_DEV_XID_ERRORS": "gauge",
        "DCGM_FI_DEV_FB_FREE": "gauge",
        "DCGM_FI_DEV_FB_USED": "gauge",
        "DCGM_FI_DEV_FB_RESERVED": "gauge",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "counter",
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS": "gauge",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "counter",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "counter",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": "gauge",
        "DCGM_FI_DRIVER_VERSION": "label",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gauge",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "gauge",
        "DCGM_FI_PROF_DRAM_ACTIVE": "gauge",
        "DCGM_FI_PROF_PCIE_TX_BYTES": "gauge",
        "DCGM_FI_PROF_PCIE_RX_BYTES": "gauge",
    }
)

# Fields the same CSV lists commented out (an operator may enable them). The two
# PCIE_*_BYTES lines there say counter; the enabled lines above (gauge) win.
DCGM_DISABLED_FIELD_TYPES: Final[Mapping[str, str]] = MappingProxyType(
    {
        **dict.fromkeys(
            (
                "DCGM_FI_DEV_POWER_VIOLATION",
                "DCGM_FI_DEV_THERMAL_VIOLATION",
                "DCGM_FI_DEV_SYNC_BOOST_VIOLATION",
                "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",
                "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
                "DCGM_FI_DEV_RELIABILITY_VIOLATION",
                "DCGM_EXP_CLOCK_EVENTS_COUNT",
                "DCGM_EXP_XID_ERRORS_COUNT",
                "DCGM_EXP_GPU_HEALTH_STATUS",
                "DCGM_EXP_P2P_STATUS",
                "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
                "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
                "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
                "DCGM_FI_DEV_RETIRED_SBE",
                "DCGM_FI_DEV_RETIRED_DBE",
                "DCGM_FI_DEV_RETIRED_PENDING",
                "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
                "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
                "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
                "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0",
            ),
            "counter",
        ),
        **dict.fromkeys(
            (
                "DCGM_FI_NVML_VERSION",
                "DCGM_FI_DEV_BRAND",
                "DCGM_FI_DEV_SERIAL",
                "DCGM_FI_DEV_OEM_INFOROM_VER",
                "DCGM_FI_DEV_ECC_INFOROM_VER",
                "DCGM_FI_DEV_POWER_INFOROM_VER",
                "DCGM_FI_DEV_INFOROM_IMAGE_VER",
                "DCGM_FI_DEV_VBIOS_VERSION",
            ),
            "label",
        ),
        **dict.fromkeys(
            (
                "DCGM_FI_PROF_SM_ACTIVE",
                "DCGM_FI_PROF_SM_OCCUPANCY",
                "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
                "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
                "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
            ),
            "gauge",
        ),
    }
)

# Types for exposition lines without a TYPE line: every field the CSV names.
DCGM_KNOWN_FIELD_TYPES: Final[Mapping[str, str]] = MappingProxyType(
    {**DCGM_DISABLED_FIELD_TYPES, **DCGM_DEFAULT_FIELD_TYPES}
)

# Unsupported fields report sentinels such as 9223372036854775794 (dcgm-exporter README).
SENTINEL_THRESHOLD: Final = 9.2e18

_FIELD_NAME = re.compile(r"DCGM_[A-Z0-9_]+")


@dataclass(frozen=True, slots=True)
class GpuStats:
    """One GPU (or MIG instance) in one dcgm-exporter scrape; None = not exposed."""

    gpu: str  # the `gpu` label: device index on the host
    uuid: str
    gpu_instance: str | None  # GPU_I_ID, MIG only
    model_name: str | None  # modelName
    hostname: str | None  # `Hostname` before dcgm-exporter PR #655, `hostname` after
    pod: str | None
    namespace: str | None
    container: str | None
    utilisation_pct: float | None  # DCGM_FI_DEV_GPU_UTIL, % 0-100
    power_w: float | None  # DCGM_FI_DEV_POWER_USAGE, W
    energy_mj: float | None  # DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, mJ counter since boot
    xid_last_code: int | None  # DCGM_FI_DEV_XID_ERRORS: code of the last XID, not a count
    fb_used_mib: float | None  # DCGM_FI_DEV_FB_USED, MiB
    fb_free_mib: float | None  # DCGM_FI_DEV_FB_FREE, MiB
    temperature_c: float | None  # DCGM_FI_DEV_GPU_TEMP, degrees C
    fields: Mapping[str, float] = field(hash=False)  # every field exposed, sentinels dropped


def dcgm_field_types(*, csv_text: str, include_disabled: bool = False) -> dict[str, str]:
    """FIELD -> type ("gauge", "counter", "label") from a dcgm-exporter counters CSV.

    Lines starting with `#` are disabled fields (or plain comments); they are left out
    unless include_disabled, and an enabled line always wins over a disabled one.
    """
    enabled: dict[str, str] = {}
    disabled: dict[str, str] = {}
    for raw_line in csv_text.splitlines():
        line = raw_line.strip()
        is_disabled = line.startswith("#")
        parts = [part.strip() for part in line.lstrip("#").split(",", 2)]
        if len(parts) < 2 or not _FIELD_NAME.fullmatch(parts[0]) or not parts[1]:
            continue
        (disabled if is_disabled else enabled)[parts[0]] = parts[1]
    return {**disabled, **enabled} if include_disabled else enabled


def gpu_stats(*, families: Iterable[Family]) -> tuple[GpuStats, ...]:
    """Per-GPU values of the DCGM families, keyed by gpu + UUID (+ MIG instance)."""
    labels_by_gpu: dict[tuple[str, str, str | None], dict[str, str]] = {}
    values_by_gpu: dict[tuple[str, str, str | None], dict[str, float]] = {}
    for family in families:
        for raw_labels, value in family_values(family=family):
            if not math.isfinite(value) or value >= SENTINEL_THRESHOLD:
                continue
            labels = {k.lower(): v for k, v in raw_labels.items() if v != ""}
            key = (labels.get("gpu", ""), labels.get("uuid", ""), labels.get("gpu_i_id"))
            known = labels_by_gpu.setdefault(key, {})
            for name, label_value in labels.items():
                known.setdefault(name, label_value)
            values_by_gpu.setdefault(key, {}).setdefault(family.name, value)
    result = []
    for key, labels in labels_by_gpu.items():
        values = values_by_gpu[key]
        xid = values.get("DCGM_FI_DEV_XID_ERRORS")
        result.append(
            GpuStats(
                gpu=key[0],
                uuid=key[1],
                gpu_instance=key[2],
                model_name=labels.get("modelname"),
                hostname=labels.get("hostname"),
                pod=labels.get("pod", labels.get("pod_name")),
                namespace=labels.get("namespace", labels.get("pod_namespace")),
                container=labels.get("container", labels.get("container_name")),
                utilisation_pct=values.get("DCGM_FI_DEV_GPU_UTIL"),
                power_w=values.get("DCGM_FI_DEV_POWER_USAGE"),
                energy_mj=values.get("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
                xid_last_code=None if xid is None else int(xid),
                fb_used_mib=values.get("DCGM_FI_DEV_FB_USED"),
                fb_free_mib=values.get("DCGM_FI_DEV_FB_FREE"),
                temperature_c=values.get("DCGM_FI_DEV_GPU_TEMP"),
                fields=MappingProxyType(values),
            )
        )
    result.sort(key=lambda stats: (_index(stats.gpu), stats.uuid, stats.gpu_instance or ""))
    return tuple(result)


def _index(gpu: str) -> tuple[int, str]:
    return (int(gpu), "") if gpu.isdigit() else (1 << 30, gpu)
