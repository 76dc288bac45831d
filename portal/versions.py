"""Effective-dated versions: prices, contracts, promotions, cost models, factory costs,
deployment versions, levers and goals. Each starts on a whole UTC hour, is never edited once
in force and may be deleted only before it takes effect (a mistake caught in time); a change
is a new version. One that feeds a month's figures never takes effect inside a closed month
(portal.closing). The rules are here once; each app's service checks its own fields, stores
the version through `version_create` and tells the pipeline stage that reads it (a price or
contract: billing's rating queue; a deployment version: metering's change log). Which
version is in force at an instant is portal.effective's answer."""

from collections.abc import Callable, Hashable
from datetime import datetime

from django.db import IntegrityError, models, transaction

from portal import clock
from portal.closing import version_closed_check
from portal.effective import InForce, in_force_by
from portal.errors import FieldError
from portal.services import audit_object, object_delete


def effective_from_check(moment: datetime, *, in_figures: bool = True) -> None:
    """A version starts on a whole UTC hour. One that feeds a month's figures (a price,
    contract, cost model, factory cost or deployment version: `in_figures`) may not start
    before the end of the last closed month (it would be in force inside it); levers and
    goals are plans, not figures."""
    if moment.minute or moment.second or moment.microsecond:
        raise FieldError("effective_from", "must be a whole UTC hour (minutes and seconds 0)")
    if in_figures:
        version_closed_check(moment=moment, field="effective_from")


def version_create(version: models.Model, *, series: dict, conflict: str, by=None) -> models.Model:
    """Store a new version: `version` is unsaved, its fields checked by its app's service
    (effective_from with effective_from_check). Another version of the same series (the
    fields in `series`) at the same instant is refused with `conflict`, whether it was
    there before or a concurrent request stored it first. Audited as
    `<audit_type>.create`, the model's audit type (portal.models.EffectiveDated)."""
    object_type = version.audit_type
    same = type(version).objects.filter(**series, effective_from=version.effective_from)
    if same.exists():
        raise FieldError("effective_from", conflict)
    try:
        with transaction.atomic():
            version.save(force_insert=True)
    except IntegrityError:  # a concurrent request stored the same version first
        raise FieldError("effective_from", conflict) from None
    audit_object(obj=version, actor=by, action=f"{object_type}.create", object_type=object_type)
    return version


@transaction.atomic
def version_delete(*, version: models.Model, by=None) -> None:
    """Delete a version that has not taken effect yet; one in force is refused. Audited as
    `<audit_type>.delete`."""
    object_type = version.audit_type
    locked = type(version).objects.select_for_update().get(pk=version.pk)
    if locked.effective_from <= clock.now():
        raise FieldError(
            "effective_from", "in force: add a new version instead of deleting this one"
        )
    object_delete(obj=locked, actor=by, object_type=object_type, action=f"{object_type}.delete")


def version_in_force(versions: models.QuerySet, *, at: datetime) -> models.Model | None:
    """The version of one series (the rows of `versions`) in force at `at`, or None before
    its first: portal.effective's answer, for the database's records."""
    return InForce(versions.filter(effective_from__lte=at)).at(at)


def versions_in_force(
    versions: models.QuerySet, *, at: datetime, series: Callable[[models.Model], Hashable]
) -> dict:
    """The version in force at `at` of each series among `versions` (keyed by `series`,
    e.g. the pool of a cost model); series not started by then are absent."""
    started = in_force_by(versions.filter(effective_from__lte=at), series=series)
    return {key: each.at(at) for key, each in started.items()}
