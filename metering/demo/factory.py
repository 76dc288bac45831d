"""Demo step: the pools, served models and deployments."""

from decimal import Decimal

from metering.demo.parameters import POOLS, SLO_TARGET
from metering.models import Deployment, Pool, ServedModel
from metering.services.factory import VersionSpec, deployment_create, served_model_aliases_set
from portal.demo import demo_step


@demo_step("metering: pools, models, deployments")
def demo_factory(*, stdout) -> None:
    for slug, name, gpu_type, gpus, model_slug, model_name, alias, r_ref, ttft, tpot in POOLS:
        pool, _ = Pool.objects.update_or_create(
            slug=slug,
            defaults={"name": name, "gpu_type": gpu_type, "gpu_count": gpus, "site": "demo"},
        )
        model, _ = ServedModel.objects.update_or_create(
            slug=model_slug, defaults={"name": model_name}
        )
        served_model_aliases_set(model=model, aliases=[alias], by=None)
        if not Deployment.objects.filter(model=model, pool=pool).exists():
            deployment_create(
                slug=f"{model_slug}@{slug}",
                model=model,
                pool=pool,
                by=None,
                spec=VersionSpec(
                    r_ref=Decimal(r_ref), slo_ttft_ms=ttft, slo_tpot_ms=tpot, slo_target=SLO_TARGET
                ),
            )
