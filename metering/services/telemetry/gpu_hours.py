"""dcgm-exporter expositions: add each GPU's sample to its GpuHourly row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import F

from metering.domain.telemetry.counters import counter_delta
from metering.domain.telemetry.dcgm import GpuStats
from metering.models import GpuHourly, Pool


def _gpu_key(gpu: GpuStats) -> str:
    if gpu.uuid:
        return f"{gpu.uuid}/{gpu.gpu_instance}" if gpu.gpu_instance else gpu.uuid
    return f"{gpu.hostname or ''}:{gpu.gpu}" + (f"/{gpu.gpu_instance}" if gpu.gpu_instance else "")


def store_gpus(
    *,
    pool: Pool,
    hour: datetime,
    now: datetime,
    gpus: Sequence[GpuStats],
    previous: Mapping[str, Any],
) -> tuple[dict[str, Any], bool]:
    before: Mapping[str, Mapping[str, Any]] = previous.get("gpus", {})
    by_key = {_gpu_key(gpu): gpu for gpu in gpus}
    state: dict[str, dict[str, Any]] = {}
    if by_key:
        GpuHourly.objects.bulk_create(
            [GpuHourly(pool=pool, hour=hour, gpu_key=key) for key in sorted(by_key)],
            ignore_conflicts=True,
        )
        rows = GpuHourly.objects.select_for_update().filter(
            pool=pool, hour=hour, gpu_key__in=list(by_key)
        )
        for row in rows.order_by("gpu_key"):
            gpu = by_key[row.gpu_key]
            old = before.get(row.gpu_key, {})
            state[row.gpu_key] = _add_gpu_sample(row=row, gpu=gpu, old=old, now=now)
    return {"gpus": state}, not any(key in before for key in by_key)


def _add_gpu_sample(
    *, row: GpuHourly, gpu: GpuStats, old: Mapping[str, Any], now: datetime
) -> dict[str, Any]:
    """Add one sample of a GPU to its hour; returns the GPU's next state."""
    energy_j = Decimal(0)
    energy_mj = gpu.energy_mj if gpu.energy_mj is not None else old.get("energy_mj")
    if gpu.energy_mj is not None and gpu.energy_mj >= 0:
        increase_mj = counter_delta(previous=old.get("energy_mj"), current=gpu.energy_mj)
        energy_j = (Decimal(repr(increase_mj)) / 1000).quantize(Decimal("0.001"))
    xid = gpu.xid_last_code
    previous_xid = old.get("xid")
    is_new_xid = xid is not None and xid != 0 and "xid" in old and xid != previous_xid
    changes: dict[str, Any] = {
        "samples": F("samples") + 1,
        "energy_j": F("energy_j") + energy_j,
        "xid_changes": F("xid_changes") + (1 if is_new_xid else 0),
        "last_observed_at": now,
        "gpu": gpu.gpu,
        "uuid": gpu.uuid,
        "model_name": gpu.model_name or "",
        "hostname": gpu.hostname or "",
        "pod": gpu.pod or "",
        "namespace": gpu.namespace or "",
    }
    if gpu.utilisation_pct is not None:
        changes["utilisation_samples"] = F("utilisation_samples") + 1
        changes["utilisation_pct_sum"] = F("utilisation_pct_sum") + gpu.utilisation_pct
    if gpu.power_w is not None:
        changes["power_samples"] = F("power_samples") + 1
        changes["power_w_sum"] = F("power_w_sum") + gpu.power_w
    if xid is not None:
        changes["xid_last_code"] = xid
    GpuHourly.objects.filter(pk=row.pk).update(**changes)
    return {"energy_mj": energy_mj, "xid": xid if xid is not None else previous_xid}
