"""Lever applications: a lever recorded in service, or withdrawn before a cycle measures it."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

from flywheel.domain.loop.factors import FACTORS
from flywheel.models import LeverApplication
from flywheel.selectors.loop.levers import levers_in_force
from flywheel.selectors.measurement import FactoryData, kpi_read
from portal import clock
from portal.access import acting_user
from portal.errors import FieldError
from portal.periods import Period, hour_floor
from portal.services import audit_object, object_delete

BASELINE_DAYS = 7  # an application's "before": the 7 days up to it

APPLICATION_DEMANDS = ("measured", "unlimited")  # what a projection compared later assumed


def _factor_strings(kpis) -> dict[str, str]:
    return {f: str(getattr(kpis, f)) for f in FACTORS if getattr(kpis, f) is not None}


def lever_apply(
    *,
    slug: str,
    applied_at: datetime,
    note: str = "",
    demand: str = "measured",
    now: datetime | None = None,
    data: FactoryData | None = None,
    by=None,
) -> LeverApplication:
    """Record that lever `slug` went into service at `applied_at` (not in the future),
    with the factors measured over the 7 days before it, the typical multipliers of the
    version in force then and the demand the projection assumed (measured or unlimited):
    what the next cycle will compare against."""
    now = now or clock.now()
    if demand not in APPLICATION_DEMANDS:
        raise FieldError("demand", f"must be one of {', '.join(APPLICATION_DEMANDS)}")
    if applied_at.tzinfo is None:
        raise FieldError("applied_at", "must include a time zone")
    if applied_at > now:
        raise FieldError("applied_at", "must not be in the future: record it once done")
    # The version in force then; one added to the catalogue since is taken as it is now.
    lever = next((v for v in levers_in_force(at=applied_at) if v.slug == slug), None) or next(
        (v for v in levers_in_force(at=now) if v.slug == slug), None
    )
    if lever is None:
        raise FieldError("lever", f"no active lever {slug!r} in the catalogue")
    if LeverApplication.objects.filter(lever__slug=slug).exists():
        raise FieldError("lever", f"lever {slug} is already recorded as applied")
    end = hour_floor(applied_at)
    start = end - timedelta(days=BASELINE_DAYS)
    data = data if data is not None else kpi_read(Period(start, end))
    before = data.kpis(scope="factory", start=start, end=end)
    with transaction.atomic():
        application = LeverApplication.objects.create(
            lever=lever,
            applied_at=applied_at,
            note=note,
            baseline_start=start,
            baseline_end=end,
            baseline_factors=_factor_strings(before),
            projected={factor: values["typical"] for factor, values in lever.effects.items()},
            demand=demand,
            created_by=acting_user(by),
        )
        audit_object(
            obj=application, actor=by, action="lever.apply", object_type="lever_application"
        )
    return application


@transaction.atomic
def lever_application_delete(*, application: LeverApplication, by=None) -> None:
    """Withdraw an application recorded by mistake, before a cycle has measured it."""
    locked = LeverApplication.objects.select_for_update().get(pk=application.pk)
    if locked.evaluated_by_id is not None:
        raise FieldError("evaluated_by", "already measured by a cycle: it stays on record")
    object_delete(obj=locked, actor=by, object_type="lever_application", action="lever.unapply")
