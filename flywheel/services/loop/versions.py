"""Lever and goal versions: effective-dated, create-only once in force, audited."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db import transaction

from flywheel.domain.loop.factors import FACTORS, target_refusal
from flywheel.models import Goal, Lever
from portal.access import acting_user
from portal.errors import FieldError
from portal.versions import effective_from_check, version_create

ESTIMATE_KEYS = ("low", "typical", "high")


def _check_currency(currency: str) -> None:
    if currency != settings.FACTORY_CURRENCY:
        raise FieldError(
            "currency",
            f"levers and goals are kept in the factory currency {settings.FACTORY_CURRENCY}",
        )


# Multipliers and targets as a scenario takes them: 6 decimal places, below a million.
SMALLEST, LARGEST = Decimal("0.000001"), Decimal(10**6)


def _decimal(value, field: str) -> Decimal:
    """A multiplier or target: a number (JSON number or string) in the scenario's range,
    so that none underflows or overflows the projection."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise FieldError(field, "must be a number")
    try:
        number = Decimal(str(value))
    except ArithmeticError:
        raise FieldError(field, "must be a number") from None
    if not number.is_finite():
        raise FieldError(field, "must be a finite number")
    if number and not SMALLEST <= abs(number) < LARGEST:
        raise FieldError(field, "must be between 0.000001 and 999999.999999")
    if number.normalize().as_tuple().exponent < -6:
        raise FieldError(field, "at most 6 decimal places")
    return number


def effects_clean(effects, *, may_be_empty: bool = False) -> dict[str, dict[str, str]]:
    """Validate a lever's effects: {factor: {"low", "typical", "high"}}, multipliers with
    0 < low ≤ typical ≤ high; returned with the numbers as plain decimal strings. None
    at all only where `may_be_empty` (a lever that only withdraws GPUs)."""
    if not isinstance(effects, dict) or (not effects and not may_be_empty):
        raise FieldError("effects", "name at least one factor and its multipliers")
    cleaned = {}
    for factor, values in effects.items():
        if factor not in FACTORS:
            raise FieldError(
                f"effects.{factor}", f"unknown factor; use one of {', '.join(FACTORS)}"
            )
        if not isinstance(values, dict) or set(values) != set(ESTIMATE_KEYS):
            raise FieldError(f"effects.{factor}", "give exactly low, typical and high")
        numbers = {key: _decimal(values[key], f"effects.{factor}.{key}") for key in ESTIMATE_KEYS}
        if not 0 < numbers["low"] <= numbers["typical"] <= numbers["high"]:
            raise FieldError(f"effects.{factor}", "multipliers need 0 < low ≤ typical ≤ high")
        cleaned[factor] = {key: format(numbers[key].normalize(), "f") for key in ESTIMATE_KEYS}
    return dict(sorted(cleaned.items(), key=lambda kv: FACTORS.index(kv[0])))


def _scope_check(*, pool, deployment, gpus_withdrawn: int) -> None:
    if pool is not None and deployment is not None:
        raise FieldError("deployment", "a lever acts in one pool or one deployment, not both")
    if gpus_withdrawn < 0:
        raise FieldError("gpus_withdrawn", "must not be negative")
    if not gpus_withdrawn:
        return
    where = deployment.pool if deployment is not None else pool
    if where is None:
        raise FieldError("gpus_withdrawn", "name the pool (or deployment) whose GPUs leave service")
    if gpus_withdrawn > where.gpu_count:
        raise FieldError(
            "gpus_withdrawn", f"pool {where.slug} has {where.gpu_count:,} GPUs installed"
        )


@transaction.atomic
def lever_create(
    *,
    slug: str,
    name: str,
    description: str,
    effects: dict,
    one_time_cost: Decimal,
    monthly_cost: Decimal,
    effective_from: datetime,
    is_active: bool = True,
    source: str = Lever.Source.OPERATOR,
    observations: int = 0,
    currency: str | None = None,
    pool=None,
    deployment=None,
    gpus_withdrawn: int = 0,
    by=None,
) -> Lever:
    """Add a lever version (a new lever, a change, or a retirement with is_active False);
    another version of the slug at the same instant is a conflict. It acts factory-wide,
    or in `pool`, or in `deployment` (its pool, by its share); it may take
    `gpus_withdrawn` GPUs of that pool out of service."""
    currency = currency or settings.FACTORY_CURRENCY
    _check_currency(currency)
    effective_from_check(effective_from, in_figures=False)  # a plan: closed months allow it
    if one_time_cost < 0:
        raise FieldError("one_time_cost", "must not be negative")
    if monthly_cost < 0:
        raise FieldError("monthly_cost", "must not be negative")
    if not description.strip():
        raise FieldError(
            "description", "say how the lever works and where its multipliers come from"
        )
    _scope_check(pool=pool, deployment=deployment, gpus_withdrawn=gpus_withdrawn)
    cleaned = effects_clean(effects, may_be_empty=gpus_withdrawn > 0)
    return version_create(
        Lever(
            slug=slug,
            name=name,
            description=description,
            effects=cleaned,
            one_time_cost=one_time_cost,
            monthly_cost=monthly_cost,
            currency=currency,
            is_active=is_active,
            source=source,
            observations=observations,
            pool=pool,
            deployment=deployment,
            gpus_withdrawn=gpus_withdrawn,
            effective_from=effective_from,
            created_by=acting_user(by),
        ),
        series={"slug": slug},
        conflict=f"lever {slug} already has a version from that instant",
        by=by,
    )


@transaction.atomic
def goal_create(
    *,
    effective_from: datetime,
    min_gross_margin: Decimal | None = None,
    min_ebitda_per_month: Decimal | None = None,
    min_tfi: Decimal | None = None,
    factor_targets: dict | None = None,
    note: str = "",
    currency: str | None = None,
    by=None,
) -> Goal:
    """Add a goal version; at least one criterion; ratios in [0, 1]; factor targets in
    (0, 1] (η: (0, 10])."""
    currency = currency or settings.FACTORY_CURRENCY
    _check_currency(currency)
    effective_from_check(effective_from, in_figures=False)  # a plan: closed months allow it
    if min_gross_margin is None and min_ebitda_per_month is None and min_tfi is None:
        raise FieldError(
            "min_gross_margin", "set at least one of gross margin, EBITDA per month or TFI"
        )
    if min_gross_margin is not None and min_gross_margin > 1:
        raise FieldError("min_gross_margin", "a ratio at most 1 (0.55 = 55%)")
    if min_tfi is not None and not 0 <= min_tfi <= 1:
        raise FieldError("min_tfi", "a ratio between 0 and 1 (0.35 = 35%)")
    if factor_targets is not None and not isinstance(factor_targets, dict):
        raise FieldError("factor_targets", 'an object: factor → target, e.g. {"occupancy": "0.8"}')
    targets = {}
    for factor, value in (factor_targets or {}).items():
        if factor not in FACTORS:
            raise FieldError(f"factor_targets.{factor}", "unknown factor")
        number = _decimal(value, f"factor_targets.{factor}")
        if refusal := target_refusal(factor, number):
            raise FieldError(f"factor_targets.{factor}", refusal)
        targets[factor] = format(number.normalize(), "f")
    return version_create(
        Goal(
            min_gross_margin=min_gross_margin,
            min_ebitda_per_month=min_ebitda_per_month,
            min_tfi=min_tfi,
            factor_targets=targets,
            note=note,
            currency=currency,
            effective_from=effective_from,
            created_by=acting_user(by),
        ),
        series={},
        conflict="a goal already starts at that instant",
        by=by,
    )
