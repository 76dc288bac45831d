"""The flywheel's alert kinds (kpis.md section 3c): the params of `gpu_waste` and
`kpi_below_band`, when a pool wastes GPUs and what an idle GPU-hour costs. Pure: the
figures come from flywheel.selectors.alerts."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext

from flywheel.domain.kpis import KPI, KPI_CONTEXT, ZERO
from flywheel.domain.tfom import CostModel, gpu_hour_cost
from portal.errors import FieldError
from portal.formatting import number_text
from portal.money import round_half_up

SECONDS_PER_HOUR = 3600

DEFAULT_WINDOW_HOURS = 3
MAX_WINDOW_HOURS = 168  # a week
DEFAULT_THRESHOLD_PCT = Decimal(10)  # % of the pool's healthy GPU-hours in the window
PCT_PLACES = Decimal("0.0001")

KPIS = ("tef", "tfi")
MAX_KPI_THRESHOLD = Decimal(10)  # TEF and TFI are ratios (1 is every GPU-second standard)
KPI_THRESHOLD_PLACES = Decimal("0.000001")

HUNDRED = Decimal(100)
ONE = Decimal(1)


def decimal_text(value: Decimal) -> str:
    """A decimal as params store it: plain notation, no trailing zeros ("0.5", "10")."""
    text = f"{value.normalize():f}"
    return "0" if text == "-0" else text


def _decimal(value, *, field: str, example: str) -> Decimal:
    """A number or a decimal string as Decimal (floats read as written: 0.1 is 0.1)."""
    message = f'a number or a decimal string, e.g. "{example}"'
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise FieldError(field, message)
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise FieldError(field, message) from None
    if not number.is_finite():
        raise FieldError(field, message)
    return number


def _unknown_check(params: dict, *, known: tuple[str, ...], kind: str) -> None:
    if unknown := sorted(set(params) - set(known)):
        raise FieldError(f"params.{unknown[0]}", f"a {kind} rule takes {', '.join(known)}")


def gpu_waste_params_check(params: dict) -> dict:
    """{"window_hours": whole hours 1-168 (default 3), "threshold_pct": a percent above 0
    and at most 100, to 4 decimals (default 10)}, stored as {"window_hours": 3,
    "threshold_pct": "10"}; errors name params.<x>."""
    _unknown_check(params, known=("window_hours", "threshold_pct"), kind="gpu_waste")
    hours = params.get("window_hours", DEFAULT_WINDOW_HOURS)
    if isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= MAX_WINDOW_HOURS:
        raise FieldError("params.window_hours", f"whole hours from 1 to {MAX_WINDOW_HOURS}")
    field = "params.threshold_pct"
    pct = _decimal(params.get("threshold_pct", DEFAULT_THRESHOLD_PCT), field=field, example="10")
    if not ZERO < pct <= HUNDRED:
        raise FieldError(field, "a percent above 0 and at most 100")
    if pct != pct.quantize(PCT_PLACES):
        raise FieldError(field, "at most 4 decimals")
    return {"window_hours": hours, "threshold_pct": decimal_text(pct)}


def kpi_below_band_params_check(params: dict) -> dict:
    """{"kpi": "tef" | "tfi", "threshold": a ratio above 0 and at most 10, to 6 decimals
    (a number or a decimal string)}, both required, stored as {"kpi": "tef", "threshold":
    "0.4"}; errors name params.<x>."""
    _unknown_check(params, known=("kpi", "threshold"), kind="kpi_below_band")
    kpi = params.get("kpi")
    if kpi not in KPIS:
        raise FieldError("params.kpi", "tef or tfi")
    if params.get("threshold") is None:
        raise FieldError(
            "params.threshold", 'required: the ratio below which it fires, e.g. "0.40"'
        )
    threshold = _decimal(params["threshold"], field="params.threshold", example="0.40")
    if not ZERO < threshold <= MAX_KPI_THRESHOLD:
        raise FieldError("params.threshold", "a ratio above 0 and at most 10, e.g. 0.40")
    if threshold != threshold.quantize(KPI_THRESHOLD_PLACES):
        raise FieldError("params.threshold", "at most 6 decimals")
    return {"kpi": kpi, "threshold": decimal_text(threshold)}


def kpi_is_below(*, value: Decimal | None, threshold: Decimal) -> bool:
    """A closed day's KPI below the rule's threshold; no value (nothing in service) never is."""
    return value is not None and value < threshold


# How a kpi_below_band alert reads (its kind's `threshold_shown` and `value_shown`, and its
# summary): the KPI's figures as its declaration shows them, "TEF 44.8%" below "90.0%".


def kpi_threshold_shown(threshold: str, figures: dict) -> str:
    """The threshold of a kpi_below_band alert in its KPI's unit: "0.9" → "90.0%"."""
    return KPI[figures["kpi"]].text(Decimal(threshold))


def kpi_value_shown(value: str, figures: dict) -> str:
    """The value of a kpi_below_band alert, named: "TEF 44.8%"."""
    kpi = KPI[figures["kpi"]]
    return f"{kpi.symbol} {kpi.text(Decimal(value))}"


def kpi_below_summary(*, kpi: str, where: str, day: str, value: Decimal, threshold: str) -> str:
    """ "TEF of the factory on 5 Dec 2026 was 44.8%, below 90.0%"."""
    declared = KPI[kpi]
    return (
        f"{declared.symbol} of {where} on {day} was {declared.text(value)}, "
        f"below {declared.text(Decimal(threshold))}"
    )


# How a gpu_waste alert reads: its threshold a share of the healthy GPU-hours, its value
# the idle GPU-hours and what they cost beside that share.


def gpu_waste_threshold_shown(threshold: str, figures: dict) -> str:
    return f"{threshold}% idle"


def gpu_waste_value_shown(value: str, figures: dict) -> str:
    """ "897 GPU-hours idle (59.7%), 1,193.60 USD" (no cost model: the hours alone)."""
    hours = number_text(round_half_up(amount=Decimal(figures["idle_gpu_hours"]), quantum=ONE))
    shown = f"{hours} GPU-hours idle ({value})"
    if "idle_cost" in figures:
        shown += f", {number_text(Decimal(figures['idle_cost']))} {figures['currency']}"
    return shown


@dataclass(frozen=True)
class GpuWaste:
    """A pool's healthy GPU time over a window: A (healthy), B (busy) and A − B (idle), in
    GPU-hours, and whether the idle share is above the rule's threshold."""

    healthy_gpu_hours: Decimal
    busy_gpu_hours: Decimal
    idle_gpu_hours: Decimal
    idle_pct: Decimal | None  # % of the healthy GPU-hours; None without any
    is_wasteful: bool


def gpu_waste_measure(
    *, available_gpu_seconds: Decimal, busy_gpu_seconds: Decimal, threshold_pct: Decimal
) -> GpuWaste:
    """Healthy idle GPU-hours (A − B) / 3600, wasteful above `threshold_pct`% of the healthy
    GPU-hours A / 3600 (kpis.md section 3c)."""
    with localcontext(KPI_CONTEXT):
        idle_seconds = available_gpu_seconds - busy_gpu_seconds
        return GpuWaste(
            healthy_gpu_hours=available_gpu_seconds / SECONDS_PER_HOUR,
            busy_gpu_hours=busy_gpu_seconds / SECONDS_PER_HOUR,
            idle_gpu_hours=idle_seconds / SECONDS_PER_HOUR,
            idle_pct=idle_seconds * HUNDRED / available_gpu_seconds
            if available_gpu_seconds
            else None,
            # Compared without dividing: idle × 100 > threshold × healthy.
            is_wasteful=idle_seconds * HUNDRED > threshold_pct * available_gpu_seconds,
        )


def idle_cost_per_gpu_hour(*, cost_model: CostModel) -> Decimal:
    """What an idle healthy GPU-hour costs (kpis.md section 3c): `capex_per_gpu /
    depreciation_months / 730 + (hosting + network_storage) / 730 + power_kw_per_gpu ×
    idle_power_ratio × pue × electricity_price_per_kwh`, the energy as the TFOM models an
    idle GPU's (pool_energy_kwh). Unrounded money per GPU-hour."""
    return gpu_hour_cost(cost_model=cost_model, busy_share=ZERO)


def idle_cost(*, idle_gpu_hours: Decimal, cost_model: CostModel) -> Decimal:
    """The idle GPU-hours at what each costs (unrounded money)."""
    with localcontext(KPI_CONTEXT):
        return idle_gpu_hours * idle_cost_per_gpu_hour(cost_model=cost_model)
