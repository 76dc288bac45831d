"""`manage.py demo`: a registry of per-app steps that build the demo factory.

Each app registers its steps in its own `demo.py` with `@demo_step(order)`; the command
imports every app's `demo` module and runs the steps in order. Steps are idempotent.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from django.utils.module_loading import autodiscover_modules

from portal.models import Role, Tenant
from portal.services import user_ensure


@dataclass(frozen=True)
class DemoStep:
    order: int
    name: str
    run: Callable[..., None]


_STEPS: dict[str, DemoStep] = {}

# The demo logins printed by `make demo` (username, password, role, tenant slug).
DEMO_LOGINS = [
    ("operator", "operator-demo", Role.OPERATOR, None),
    ("finance", "finance-demo", Role.FINANCE, None),
    ("investor", "investor-demo", Role.INVESTOR, None),
    ("acme", "acme-demo", Role.TENANT, "acme"),
]

# name, slug, kind: the demo's tenants (the billing step gives each a contract of its kind).
DEMO_TENANTS = [
    ("Acme Robotics", "acme", "paid"),
    ("Globex Search", "globex", "trial"),  # a large proof of concept, not yet converted
    ("Initech Code Assist", "initech", "paid"),
    ("Umbrella Health", "umbrella", "paid"),
    ("Stark Analytics", "stark", "paid"),
    ("Wayne Legal AI", "wayne", "paid"),
    ("Hooli Mail", "hooli", "paid"),
    ("Pied Piper", "piedpiper", "paid"),
    ("Soylent Support", "soylent", "paid"),
    ("Tyrell Agents", "tyrell", "paid"),
    ("Cyberdyne Vision", "cyberdyne", "paid"),
    ("Massive Dynamic", "massive", "paid"),
    ("Vandelay Imports", "vandelay", "paid"),
    ("Aperture Labs", "aperture", "trial"),
    ("Black Mesa", "blackmesa", "trial"),
    ("Nakatomi Trading", "nakatomi", "trial"),
    ("Oceanic Airlines", "oceanic", "trial"),
    ("Factory Research", "research", "internal"),
    ("Factory Evals", "evals", "internal"),
    ("Dunder Paper", "dunder", "paid"),
]


def demo_step(order: int, name: str | None = None) -> Callable:
    """Register `fn(*, stdout)` as a demo step run in `order` (lower first)."""

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        step = DemoStep(order=order, name=name or f"{fn.__module__}.{fn.__name__}", run=fn)
        _STEPS[step.name] = step
        return fn

    return register


def demo_steps() -> list[DemoStep]:
    autodiscover_modules("demo")
    return sorted(_STEPS.values(), key=lambda s: (s.order, s.name))


def demo_run(*, stdout: TextIO) -> None:
    """Run every registered step in order."""
    for step in demo_steps():
        stdout.write(f"→ {step.name}\n")
        step.run(stdout=stdout)


@demo_step(10, "portal: tenants and demo logins")
def demo_tenants_and_users(*, stdout: TextIO) -> None:
    for name, slug, _kind in DEMO_TENANTS:
        Tenant.objects.update_or_create(slug=slug, defaults={"name": name})
    for username, password, role, tenant_slug in DEMO_LOGINS:
        tenant = Tenant.objects.get(slug=tenant_slug) if tenant_slug else None
        user_ensure(username=username, role=role, tenant=tenant, password=password)
