"""`manage.py demo`: the steps that build the demo factory, in the order of its story.

Each app writes its steps in its own `demo` module, names them with `@demo_step("…")` and
registers them from its AppConfig.ready (`demo_steps_register`) in a part of the story
(`Part`): the kernel names no app's step. `manage.py demo --list` prints the order. Steps
are idempotent.
"""

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import IntEnum
from typing import TextIO

from django.conf import settings
from django.contrib.auth.models import User
from django.utils.module_loading import import_string

from portal.events import email_subscriptions_set
from portal.models import Project, Role, Tenant, WebhookEndpoint
from portal.periods import day_floor
from portal.services import user_ensure
from portal.webhooks import secret_new


class Part(IntEnum):
    """The parts of the demo's story, told in this order; the steps of one part run in the
    order they were registered (the apps register in INSTALLED_APPS order)."""

    PEOPLE = 1  # tenants, logins, where events go: before any step raises one
    FACTORY = 2  # what is installed
    HISTORY = 3  # what it served and what went wrong: usage, incidents, engine telemetry
    COSTS = 4  # what it costs: before the books close a month (the close locks them)
    BOOKS = 5  # prices and contracts; the months that are over, closed and invoiced
    FIGURES = 6  # what it was worth: the figures measured, the loop's cycle, the alerts


@dataclass(frozen=True)
class DemoStep:
    name: str
    run: Callable[..., None]


_registered: list[tuple[Part, str]] = []  # (part, a step's dotted path)


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


# The enterprise tenants' projects (demo-factory.md, "Projects"): slug, name, cost center and
# its share of the tenant's traffic; the rest of it (NO_PROJECT_SHARE) names no project.
DEMO_PROJECTS = {
    "acme": [("search", "Search", "CC-4100", 0.45), ("support-bot", "Support bot", "CC-4200", 0.3),
             ("code-review", "Code review", "CC-4300", 0.15), ("eval", "Evaluation", "CC-4900", 0.07)],
    "initech": [("code-review", "Code review", "ENG-12", 0.6), ("ci-bots", "CI bots", "ENG-14", 0.3),
                ("eval", "Evaluation", "ENG-19", 0.07)],
    "umbrella": [("triage", "Triage", "MED-1", 0.35), ("records", "Records", "MED-2", 0.25),
                 ("support-bot", "Support bot", "OPS-7", 0.2), ("research", "Research", "RND-3", 0.12),
                 ("eval", "Evaluation", "RND-9", 0.05)],
}  # fmt: skip
NO_PROJECT_SHARE = 0.03


def demo_project_draw(tenant_slug: str, rng: random.Random) -> str | None:
    """The project a tenant's hour of demo usage is metered to (each hour one project, as a
    rollup row is one per project): drawn by the projects' shares, None for a tenant without
    projects and for the share naming none. Draws from `rng` only for tenants with projects."""
    projects = DEMO_PROJECTS.get(tenant_slug)
    if not projects:
        return None
    slugs = [slug for slug, *_ in projects] + [None]
    shares = [share for *_, share in projects] + [NO_PROJECT_SHARE]
    return rng.choices(slugs, weights=shares)[0]


# One lever the operator put in service two weeks before the demo's day: the metered traffic
# shows its effect from then on (metering's demo), the flywheel has it on record as applied
# (flywheel's demo), so the cycle history shows what it realized against what it projected.
APPLIED_LEVER = "speculative-decoding"
APPLIED_EFFICIENCY = 1.04  # η realized (the published typical is x1.05)


def demo_lever_applied_at(now: datetime) -> datetime:
    """When APPLIED_LEVER went into service: 10:00 UTC, 14 days before today."""
    return day_floor(now) - timedelta(days=14) + timedelta(hours=10)


def demo_step(name: str) -> Callable:
    """Name `fn(*, stdout)` as a demo step (registered with `demo_steps_register`)."""

    def named(fn: Callable[..., None]) -> Callable[..., None]:
        fn.demo_name = name
        return fn

    return named


def demo_steps_register(part: Part, *paths: str) -> None:
    """An app's steps (dotted paths of `@demo_step` functions, imported when the demo runs)
    in one part of the story, after the steps registered in it before."""
    _registered.extend((part, path) for path in paths if (part, path) not in _registered)


def demo_steps() -> list[DemoStep]:
    """Every registered step, in the order of the story."""
    ordered = sorted(_registered, key=lambda registered: registered[0])  # stable within a part
    steps = [import_string(path) for _, path in ordered]
    return [DemoStep(name=getattr(fn, "demo_name", fn.__name__), run=fn) for fn in steps]


def demo_run(*, stdout: TextIO) -> None:
    """Run every registered step in order (flywheel's measures what the others loaded)."""
    for step in demo_steps():
        stdout.write(f"→ {step.name}\n")
        step.run(stdout=stdout)


@demo_step("portal: tenants and demo logins")
def demo_tenants_and_users(*, stdout: TextIO) -> None:
    for number, (name, slug, _kind) in enumerate(DEMO_TENANTS, start=1):
        Tenant.objects.update_or_create(
            slug=slug,
            defaults={
                "name": name,
                "billing_name": f"{name} Inc.",
                "billing_address": f"Accounts payable\n{100 + 7 * number} Market Street\n"
                f"San Francisco, CA 94{100 + number:03d}\nUnited States",
            },
        )
    for tenant_slug, projects in DEMO_PROJECTS.items():
        for slug, name, cost_center, _share in projects:
            Project.objects.update_or_create(
                tenant=Tenant.objects.get(slug=tenant_slug),
                slug=slug,
                defaults={"name": name, "cost_center": cost_center},
            )
    for username, password, role, tenant_slug in DEMO_LOGINS:
        tenant = Tenant.objects.get(slug=tenant_slug) if tenant_slug else None
        user_ensure(username=username, role=role, tenant=tenant, password=password)


# The demo's webhook endpoints: the factory's and Acme's at the receiver `make demo` starts
# (each signature verified there), and finance's ERP, down (nothing listens on port 9 of
# loopback: its deliveries fail at once and retry). No name to resolve, nothing leaves the
# machine.
DEMO_ENDPOINTS = [
    ("", "Factory operations log (make demo's receiver)", [], None),
    ("https://127.0.0.1:9/erp/hooks", "Finance ERP (down)",
     ["invoice.issued", "payment.received", "credit_note.issued", "invoice.overdue"], None),
    ("/acme", "Acme on-call (make demo's receiver)",
     ["invoice.issued", "invoice.overdue", "incident.opened", "incident.resolved"], "acme"),
]  # fmt: skip
# Who gets email (the console backend prints them in the demo).
DEMO_EMAILS = {
    "operator": ("ops@factory.example", ["incident.opened", "usage.batch_rejected"]),
    "finance": ("finance@factory.example", ["invoice.overdue", "payment.received"]),
    "acme": ("platform@acme.example", ["invoice.issued", "incident.opened"]),
}


@demo_step("portal: webhook endpoints and email opt-ins")
def demo_notifications(*, stdout: TextIO) -> None:
    for url, description, types, tenant in DEMO_ENDPOINTS:
        WebhookEndpoint.objects.get_or_create(
            url=url if url.startswith("https:") else settings.DEMO_WEBHOOK_RECEIVER + url,
            defaults={
                "description": description,
                "event_types": types,
                "tenant": Tenant.objects.get(slug=tenant) if tenant else None,
                "secret": secret_new(),
            },
        )
    for username, (address, types) in DEMO_EMAILS.items():
        user = User.objects.get(username=username)
        user.email = address
        user.save(update_fields=["email"])
        email_subscriptions_set(user=user, event_types=types)
