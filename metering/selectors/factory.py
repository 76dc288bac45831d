"""Reads of the factory's configuration: pools, served models, deployments and their versions.

The lists are QuerySets for the caller to refine (values, annotate, select_related)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from metering.models import Deployment, DeploymentVersion, Pool, ServedModel


def pool_list() -> QuerySet[Pool]:
    """Every pool of the factory, by slug."""
    return Pool.objects.all()


def served_model_list() -> QuerySet[ServedModel]:
    """Every served model, by slug."""
    return ServedModel.objects.all()


def served_model_get(*, slug: str) -> ServedModel | None:
    """The served model named `slug`, or None when there is none."""
    return ServedModel.objects.filter(slug=slug).first()


def deployment_list() -> QuerySet[Deployment]:
    """Every deployment (a served model on a pool), by slug."""
    return Deployment.objects.all()


def deployment_version_list(
    *, start: datetime | None = None, end: datetime | None = None
) -> QuerySet[DeploymentVersion]:
    """Deployment versions taking effect in [start, end) (either bound optional)."""
    bounds = {}
    if start is not None:
        bounds["effective_from__gte"] = start
    if end is not None:
        bounds["effective_from__lt"] = end
    versions = DeploymentVersion.objects.all()
    return versions.filter(**bounds) if bounds else versions
