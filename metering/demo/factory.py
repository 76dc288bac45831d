"""Demo step: the pools, served models and deployments."""

from decimal import Decimal

from metering.demo.parameters import POOLS, SLO_TARGET
from metering.domain.factory import OUTPUT, CurvePoint
from metering.models import Deployment, Pool, ServedModel
from metering.services.factory import (
    VersionSpec,
    curves_import,
    deployment_create,
    served_model_aliases_set,
)
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
                    r_ref=Decimal(r_ref),
                    slo_ttft_ms=ttft,
                    slo_tpot_ms=tpot,
                    slo_ttft_ms_priority=ttft // 2,
                    slo_target=SLO_TARGET,
                ),
            )


# Reference curves (demo-factory.md): 6–8 points of tok/s per GPU against tok/s per user per
# model on its GPU, shaped like public InferenceX fronts and passing through the demo's R_ref
# at its TPOT SLO (Llama 2,100 at 5 tok/s per user, Qwen 2,790 and DeepSeek 3,550 at 12.5);
# the other GPU types the plan may place on; and DeepSeek-R1 on B300, a GPU type the factory
# has not bought. Demo data, not measurements: `source` says so.
# model, GPU type, tp, precision, [(tok/s per user, tok/s per GPU), ...]
CURVES = [
    ("llama-3.3-70b", "H100", 2, "fp8",
     [(5, 2100), (10, 1900), (20, 1500), (30, 1150), (45, 800), (60, 520), (80, 300)]),
    ("llama-3.3-70b", "H200", 1, "fp8",
     [(5, 2900), (10, 2650), (20, 2100), (30, 1650), (45, 1150), (60, 750)]),
    ("qwen3-235b-a22b", "H200", 4, "fp8",
     [(8, 3100), (12.5, 2790), (20, 2300), (30, 1700), (45, 1100), (60, 700)]),
    ("qwen3-235b-a22b", "B200", 4, "fp8",
     [(8, 4400), (12.5, 4000), (20, 3300), (30, 2500), (45, 1700), (60, 1100)]),
    ("deepseek-r1", "B200", 8, "fp4",
     [(8, 3900), (12.5, 3550), (20, 2900), (30, 2100), (45, 1400), (60, 900), (80, 500)]),
    ("deepseek-r1", "B300", 8, "fp4",
     [(8, 5400), (12.5, 5000), (20, 4200), (30, 3200), (45, 2200), (60, 1500), (80, 900)]),
]  # fmt: skip
CURVE_SOURCE = "demo data shaped like InferenceX fronts (not a measurement)"


@demo_step("metering: reference curves (demo data, one GPU type not bought)")
def demo_curves(*, stdout) -> None:
    points = []
    for model, gpu_type, tp, precision, front in CURVES:
        for i, (per_user, per_gpu) in enumerate(front):
            point = CurvePoint(
                model=model, gpu_type=gpu_type, tp=tp, precision=precision,
                concurrency=2 ** (len(front) - 1 - i), tok_s_per_gpu=Decimal(per_gpu),
                tok_s_per_user=Decimal(str(per_user)), token_basis=OUTPUT, isl=3000,
                osl=1000, source=CURVE_SOURCE,
            )  # fmt: skip
            points.append(({"index": len(points)}, point))
    stored = curves_import(points=points, by=None)
    stdout.write(f"  {len(CURVES)} curves, {len(stored)} points\n")
