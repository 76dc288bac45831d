"""Small builders for metering tests."""

from datetime import UTC, timedelta
from decimal import Decimal

from metering.models import HourlyUsage, Pool, ServedModel, UsageChange
from metering.services.factory import VersionSpec, deployment_create, served_model_aliases_set
from metering.services.usage.rollup import rollup_days
from portal.pipeline import log_append


def make_deployment(
    *,
    model="llama-70b",
    pool="h100-a",
    gpus=8,
    r_ref="1000",
    w_in="0",
    ttft=None,
    tpot=None,
    aliases=(),
):
    pool_obj, _ = Pool.objects.get_or_create(
        slug=pool, defaults={"name": pool, "gpu_type": "H100", "gpu_count": gpus}
    )
    model_obj, _ = ServedModel.objects.get_or_create(slug=model, defaults={"name": model})
    if aliases:
        served_model_aliases_set(model=model_obj, aliases=list(aliases), by=None)
    return deployment_create(
        slug=f"{model}@{pool}",
        model=model_obj,
        pool=pool_obj,
        by=None,
        spec=VersionSpec(
            r_ref=Decimal(r_ref), w_in=Decimal(w_in), slo_ttft_ms=ttft, slo_tpot_ms=tpot
        ),
    )


def make_hourly_usage(tenant, deployment, hour, **sums) -> HourlyUsage:
    """An hourly rollup row of `sums` (every other sum 0), as if loaded (the demo's way):
    stored as it is, its day's row summed again (rollup_days) and logged in metering's
    change log as the fold would, with no rating (billing's rate stage makes that)."""
    row = HourlyUsage.objects.create(tenant=tenant, deployment=deployment, hour=hour, **sums)
    rollup_days({(tenant.pk, deployment.pk, hour.astimezone(UTC).date())})
    log_append(
        UsageChange,
        [
            UsageChange(
                kind=UsageChange.Kind.USAGE,
                tenant=tenant,
                pool_id=deployment.pool_id,
                start=hour,
                end=hour + timedelta(hours=1),
            )
        ],
        log="metering.usage",
    )
    return row


def event(i, *, tenant="tenant-a", model="llama-70b", time="2026-03-01T10:15:00Z", **extra):
    return {
        "id": f"ev-{i}",
        "time": time,
        "tenant": tenant,
        "model": model,
        "input_tokens": 100 + i,
        "cached_tokens": 10,
        "output_tokens": 50 + i,
        **extra,
    }
