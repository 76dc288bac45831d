"""A tenant's projects (kpis.md 3e; architecture.md "the kernel: tenants and their
projects"): the reads scoped to what a user may see, the writes of its members, operators
and finance (audited), and the projects the first usage event naming them creates
(`projects_ensure`, audited as created by ingestion). A tenant has at most MAX_PROJECTS.
Usage without a project is the tenant's `(none)`: project id 0 wherever usage is kept."""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Count, QuerySet

from portal.access import Capability, tenant_get, tenant_scoped, user_may, user_role
from portal.errors import FieldError
from portal.models import Project, Role, Tenant
from portal.services import audit_object, audit_record, audit_snapshot

MAX_PROJECTS = 1_000  # a tenant's projects, however created
NONE_ID = 0  # the project id of usage without a project
NONE = "(none)"  # how it is named in responses, pages, exports and filters
SLUG_MAX_LENGTH = 64
_SLUG = re.compile(r"[-a-zA-Z0-9_]+")
BAD_SLUG = f"must be a slug: 1 to {SLUG_MAX_LENGTH} letters, digits, hyphens or underscores"


class ProjectForbidden(FieldError):
    """The user's role may not write projects (403)."""

    http_status = 403


class ProjectConflict(FieldError):
    """A project of that slug exists in the tenant already (409)."""

    http_status = 409


def is_project_slug(value: object) -> bool:
    return type(value) is str and 0 < len(value) <= SLUG_MAX_LENGTH and bool(_SLUG.fullmatch(value))


def no_project_message(*, slug: str, tenant: str) -> str:
    """A token bound to a project the tenant has none of (the page and create_token)."""
    return f"No project {slug!r} of tenant {tenant!r}."


def limit_message(tenant: str) -> str:
    return (
        f"tenant {tenant!r} has {MAX_PROJECTS:,} projects, the most a tenant may have: "
        "name one of them"
    )


# ---------------------------------------------------------------- reads


def project_list(*, user: User, tenant_slug: str) -> QuerySet[Project]:
    """The projects of a tenant the user may see (404 for another tenant's member)."""
    return Project.objects.filter(tenant=tenant_get(user=user, slug=tenant_slug))


def project_get(*, user: User, tenant_slug: str, slug: str) -> Project:
    """One of them; 404 when the tenant is not the user's to see or has no such project."""
    project = project_list(user=user, tenant_slug=tenant_slug).filter(slug=slug).first()
    if project is None:
        from django.http import Http404

        raise Http404(f"No project {slug!r}.")
    return project


def projects_of_shown(*, user: User, tenant_slug: str = "") -> QuerySet[Project]:
    """The projects a page's project picker offers: the picked tenant's, else a member's own
    tenant's; none while an operator or finance shows every tenant (slugs are per tenant)."""
    if tenant_slug:
        return project_list(user=user, tenant_slug=tenant_slug).order_by("slug")
    if user_role(user) is not Role.TENANT:
        return Project.objects.none()
    return tenant_scoped(Project.objects.all(), user=user).order_by("slug")


def projects_bindable(*, user: User) -> QuerySet[Project]:
    """The projects a user may bind an ingest token to: those of the open tenants it may
    see (a member: its own tenant's)."""
    open_ones = Project.objects.exclude(tenant__status=Tenant.Status.CLOSED)
    return tenant_scoped(open_ones, user=user)


def project_names(tenant_ids: Iterable[int]) -> dict[int, tuple[str, str, str]]:
    """(slug, name, cost center) of every project of the tenants, by id; the `(none)`
    project (id 0) included. Callers have scoped the tenants already."""
    names = {NONE_ID: (NONE, NONE, "")}
    rows = Project.objects.filter(tenant_id__in=list(tenant_ids))
    for pk, slug, name, cost_center in rows.values_list("pk", "slug", "name", "cost_center"):
        names[pk] = (slug, name, cost_center)
    return names


def project_slugs(ids: Iterable[int]) -> dict[int, str]:
    """The slugs of these project ids (0: `(none)`); callers have scoped the rows already."""
    slugs = {NONE_ID: NONE}
    slugs.update(Project.objects.filter(pk__in=set(ids) - {NONE_ID}).values_list("pk", "slug"))
    return slugs


def project_id_of(*, tenant: Tenant, slug: str | None) -> int | None:
    """The id a filter by project names: NONE_ID for `(none)`, None for a slug the tenant
    has no project of."""
    if slug == NONE:
        return NONE_ID
    return Project.objects.filter(tenant=tenant, slug=slug).values_list("pk", flat=True).first()


# ---------------------------------------------------------------- writes


def _may_write(*, by: User, tenant: Tenant) -> None:
    """Operators and finance write any tenant's projects, a member its own tenant's
    (tenant_get has answered 404 for another's); investors none."""
    if not user_may(by, Capability.WRITE_PROJECTS):
        raise ProjectForbidden("", "your role may not write projects")


def _text(value: object, field: str, limit: int, *, required: bool) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise FieldError(field, "must be a string")
    value = value.strip()
    if required and not value:
        raise FieldError(field, "is required")
    if len(value) > limit:
        raise FieldError(field, f"must be at most {limit} characters")
    return value


@transaction.atomic
def project_create(
    *, tenant: Tenant, slug: object, name: object, cost_center: object = "", by: User
) -> Project:
    """A new project of `tenant` (audited); 409 naming `slug` when the tenant has one of
    that slug, 400 naming `slug` beyond MAX_PROJECTS."""
    _may_write(by=by, tenant=tenant)
    if not is_project_slug(slug):
        raise FieldError("slug", BAD_SLUG)
    name = _text(name, "name", 200, required=True)
    cost_center = _text(cost_center, "cost_center", 100, required=False)
    Tenant.objects.select_for_update().filter(pk=tenant.pk).first()  # one creator at a time
    if Project.objects.filter(tenant=tenant, slug=slug).exists():
        raise ProjectConflict("slug", f"{tenant.slug} has a project {slug!r} already")
    if Project.objects.filter(tenant=tenant).count() >= MAX_PROJECTS:
        raise FieldError("slug", limit_message(tenant.slug))
    project = Project.objects.create(tenant=tenant, slug=slug, name=name, cost_center=cost_center)
    audit_object(obj=project, actor=by, action="create", object_type="project")
    return project


@transaction.atomic
def project_update(*, project: Project, changes: dict, by: User) -> Project:
    """Change a project's name or cost center (audited). Its slug never changes: gateways,
    tokens and quotas name it (a 400 naming `slug`)."""
    _may_write(by=by, tenant=project.tenant)
    if "slug" in changes and changes["slug"] != project.slug:
        raise FieldError("slug", "a project's slug never changes: gateways and quotas name it")
    before = audit_snapshot(project)
    if "name" in changes:
        project.name = _text(changes["name"], "name", 200, required=True)
    if "cost_center" in changes:
        project.cost_center = _text(changes["cost_center"], "cost_center", 100, required=False)
    project.save()
    audit_object(obj=project, actor=by, action="update", object_type="project", before=before)
    return project


def _missing(wanted: dict[int, set[str]]) -> tuple[dict[tuple[int, str], int], dict]:
    """The ids of the projects of `wanted` (tenant id -> slugs) that exist, and per tenant
    the slugs it has no project of (sorted)."""
    ids: dict[tuple[int, str], int] = {}
    known = Project.objects.filter(
        tenant_id__in=list(wanted), slug__in={s for slugs in wanted.values() for s in slugs}
    )
    for tenant_id, slug, pk in known.values_list("tenant_id", "slug", "pk"):
        ids[(tenant_id, slug)] = pk
    missing = {
        tenant_id: sorted(s for s in slugs if (tenant_id, s) not in ids)
        for tenant_id, slugs in wanted.items()
    }
    return ids, {tenant_id: slugs for tenant_id, slugs in missing.items() if slugs}


def _beyond(missing: dict[int, list[str]]) -> dict[int, int]:
    """How many new projects each tenant has room for (MAX_PROJECTS less its own)."""
    counts = dict(
        Project.objects.filter(tenant_id__in=list(missing))
        .values("tenant_id")
        .annotate(n=Count("pk"))
        .values_list("tenant_id", "n")
    )
    return {tenant_id: max(MAX_PROJECTS - counts.get(tenant_id, 0), 0) for tenant_id in missing}


def projects_beyond_limit(wanted: dict[int, set[str]]) -> set[tuple[int, str]]:
    """The (tenant id, slug) of `wanted` that usage would create past MAX_PROJECTS: of a
    tenant's new slugs, in sorted order, those beyond its room (as `projects_ensure` refuses
    them), so a batch is refused naming `project` before anything is stored."""
    _, missing = _missing(wanted)
    room = _beyond(missing)
    return {(t, slug) for t, slugs in missing.items() for slug in slugs[room[t] :]}


def projects_ensure(
    wanted: dict[int, set[str]], *, tenant_slugs: dict[int, str]
) -> tuple[dict[tuple[int, str], int], set[tuple[int, str]]]:
    """The ids of the projects (tenant id -> slugs) that usage names, creating the ones the
    tenants lack (audited as created by ingestion): inside the caller's transaction, each
    tenant with new projects locked until it commits, so concurrent batches create each
    project once and never take a tenant past MAX_PROJECTS. Returns the ids and the (tenant
    id, slug) refused for the limit (`projects_beyond_limit`'s rule)."""
    ids, missing = _missing(wanted)
    if not missing:
        return ids, set()
    # One creator of a tenant's projects at a time: a batch that waited here sees the
    # projects the one before it created once that one committed.
    list(Tenant.objects.select_for_update().filter(pk__in=sorted(missing)).values_list("pk"))
    since, missing = _missing({t: set(slugs) for t, slugs in missing.items()})
    ids |= since  # created by batches that committed while this one waited
    room = _beyond(missing)
    created, refused = [], set()
    for tenant_id, new in sorted(missing.items()):
        refused |= {(tenant_id, slug) for slug in new[room[tenant_id] :]}
        fits = new[: room[tenant_id]]
        created += [Project(tenant_id=tenant_id, slug=slug, name=slug) for slug in fits]
    for project in Project.objects.bulk_create(created):  # their ids come back
        ids[(project.tenant_id, project.slug)] = project.pk
        audit_record(
            actor=None,
            action="create",
            object_type="project",
            object_id=str(project.pk),
            after={
                "tenant": tenant_slugs.get(project.tenant_id, str(project.tenant_id)),
                "slug": project.slug,
                "name": project.name,
                "created_by": "ingestion",
            },
        )
    return ids, refused
