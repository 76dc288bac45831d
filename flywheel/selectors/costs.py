"""The cost models and factory costs in force (effective-dated versions written by
flywheel.services.tfom)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from operator import attrgetter

from flywheel.models import CostModel, FactoryCosts
from portal.versions import version_in_force, versions_in_force


def cost_models_in_force(
    *, at: datetime, pool_ids: Iterable[int] | None = None
) -> dict[int, CostModel]:
    """The cost model version in force at `at` per pool id (pools without one are absent)."""
    versions = CostModel.objects.all()
    if pool_ids is not None:
        versions = versions.filter(pool_id__in=list(pool_ids))
    return versions_in_force(versions, at=at, series=attrgetter("pool_id"))


def factory_costs_in_force(*, at: datetime) -> FactoryCosts | None:
    """The factory costs version in force at `at`, if any was ever recorded by then."""
    return version_in_force(FactoryCosts.objects.all(), at=at)
