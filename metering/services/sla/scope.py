"""What incident and maintenance writes share: the UNSET marker, title, error and scope helpers."""

from typing import Any

from django.core.exceptions import ValidationError

UNSET: Any = object()


def check_title(title: str, errors: dict) -> str:
    title = (title or "").strip()
    if not title:
        errors.setdefault("title", "must not be empty")
    return title


def raise_if_any(errors: dict) -> None:
    if errors:
        raise ValidationError(errors)


def set_scope(obj, *, deployments, pools, tenants=UNSET) -> None:
    if deployments is not UNSET:
        obj.deployments.set(list(deployments))
    if pools is not UNSET:
        obj.pools.set(list(pools))
    if tenants is not UNSET:
        obj.tenants.set(list(tenants))
