"""The one place that decides what a user may see and do.

Every tenant-scoped query goes through `tenant_scoped`; views and API never filter by
tenant on their own. Capabilities follow the "may" table of the architecture.
"""

from collections.abc import Callable
from enum import StrEnum
from functools import wraps
from typing import TypeVar, cast
from weakref import WeakKeyDictionary

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import StrIndex
from django.http import Http404

from portal.bulk import ModelColumns, statement_cursor
from portal.models import ApiToken, Membership, Project, Role, Scope, Tenant

M = TypeVar("M", bound=Model)
T = TypeVar("T")


class Capability(StrEnum):
    WRITE_FACTORY = "write_factory"  # pools, models, deployments, capacity, incidents, levers…
    WRITE_COMMERCIAL = "write_commercial"  # prices, contracts, promotions, invoices
    READ_FACTORY = "read_factory"  # factory-wide KPIs, TFOM, flywheel
    # The flywheel's scenario simulator: a computation (it writes nothing), but a POST, and an
    # investor makes no successful request other than reads (architecture.md, roles).
    RUN_SCENARIOS = "run_scenarios"
    READ_TENANT_DATA = "read_tenant_data"  # usage, SLA, invoices (own tenant for members)
    # Configuration records a tenant member never reads, own ones included: tenants,
    # contracts, promotions, maintenance windows (tenants see only the tenant-facing reads).
    READ_CONFIGURATION = "read_configuration"
    READ_AGGREGATES = "read_aggregates"  # factory-wide totals without tenant detail
    READ_AUDIT = "read_audit"
    READ_INGESTION = "read_ingestion"  # the ingestion debugger: rejected batches, sources
    READ_BOOKS = "read_books"  # the month-end close, aged receivables: every tenant's books
    MANAGE_TOKENS = "manage_tokens"
    # A tenant's projects and their quotas: any tenant's for operators and finance, its own
    # for a member (kpis.md 3e).
    WRITE_PROJECTS = "write_projects"
    # Webhook endpoints and email opt-ins: the factory's (operators; finance for billing
    # events) and any tenant's, or a member's own tenant's; the inbox of the events one may see.
    NOTIFY = "notify"


CAPABILITIES: dict[Capability, frozenset[Role]] = {
    Capability.WRITE_FACTORY: frozenset({Role.OPERATOR}),
    Capability.WRITE_COMMERCIAL: frozenset({Role.OPERATOR, Role.FINANCE}),
    Capability.READ_FACTORY: frozenset({Role.OPERATOR, Role.FINANCE, Role.INVESTOR}),
    Capability.RUN_SCENARIOS: frozenset({Role.OPERATOR, Role.FINANCE}),
    Capability.READ_TENANT_DATA: frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}),
    Capability.READ_CONFIGURATION: frozenset({Role.OPERATOR, Role.FINANCE}),
    Capability.READ_AGGREGATES: frozenset({Role.OPERATOR, Role.FINANCE, Role.INVESTOR}),
    Capability.READ_AUDIT: frozenset({Role.OPERATOR}),
    Capability.READ_INGESTION: frozenset({Role.OPERATOR}),
    Capability.READ_BOOKS: frozenset({Role.OPERATOR, Role.FINANCE}),
    Capability.MANAGE_TOKENS: frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}),
    Capability.WRITE_PROJECTS: frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}),
    Capability.NOTIFY: frozenset({Role.OPERATOR, Role.FINANCE, Role.TENANT}),
}

# The scopes a role may put on an API token it creates.
TOKEN_SCOPES: dict[Role, frozenset[str]] = {
    Role.OPERATOR: frozenset({Scope.READ, Scope.INGEST, Scope.ADMIN, Scope.NOTIFY}),
    Role.FINANCE: frozenset({Scope.READ, Scope.NOTIFY}),
    Role.INVESTOR: frozenset(),
    # A member's `ingest` token is its own gateway's: bound to its tenant (own_gateway).
    Role.TENANT: frozenset({Scope.READ, Scope.NOTIFY, Scope.INGEST}),
}


def own_gateway(user: AbstractBaseUser | AnonymousUser, token: object) -> bool:
    """Whether `token` is a tenant member's `ingest` token bound to its own tenant: its own
    gateway, which may send usage of that tenant only (architecture.md, roles; the
    ingestion service holds what it sends to the bound tenant). A binding to one of the
    tenant's projects, once projects exist, narrows it further in the same place."""
    tenant = user_tenant(user)
    return (
        tenant is not None
        and Scope.INGEST in (getattr(token, "scopes", None) or ())
        and getattr(token, "bound_tenant_id", None) == tenant.pk
    )


# When a user is in several groups, the most powerful role wins.
_ROLE_ORDER = [Role.OPERATOR, Role.FINANCE, Role.INVESTOR, Role.TENANT]
_ROLES_RANKED = ",".join(role.value for role in _ROLE_ORDER)
# A user read by `with_access` holds its role group's name (None: none) under this name.
_ROLE_GROUP = "role_group"


def with_access(queryset: QuerySet[M], *, user: str | None = None) -> QuerySet[M]:
    """`queryset` reading with each user its tenant and its highest role group, so that
    `user_role` and `user_tenant` ask nothing more: a queryset of users (`user` None), or of
    rows whose user is the foreign key `user` (take it with `user_of`)."""
    held = Group.objects.filter(
        user=OuterRef(f"{user}_id" if user else "pk"), name__in=[r.value for r in _ROLE_ORDER]
    )
    # A role's rank is where its name stands in _ROLES_RANKED (the names are whole words of
    # it, and only they are held here): one function where a CASE of four took a quarter
    # of the time it takes every request to build this query.
    rank = StrIndex(Value(_ROLES_RANKED), "name")
    group = Subquery(held.order_by(rank).values("name")[:1])
    related = f"{user}__membership__tenant" if user else "membership__tenant"
    return queryset.select_related(related).annotate(**{_ROLE_GROUP: group})


def user_of(row: Model, *, user: str = "user") -> AbstractBaseUser:
    """The user of a row read by `with_access(…, user=user)`, holding its role group."""
    found = getattr(row, user)
    setattr(found, _ROLE_GROUP, getattr(row, _ROLE_GROUP))
    return found


def _token_read() -> tuple[tuple[type[Model], str], ...]:
    """What the token's read reads: each model by the alias of its table in the statement."""
    return (
        (ApiToken, "t"),
        (get_user_model(), "u"),
        (Membership, "m"),
        (Tenant, "mt"),
        (Tenant, "bt"),
        (Project, "bp"),
    )


def _user_read() -> tuple[tuple[type[Model], str], ...]:
    """What a session's user read reads, as _token_read."""
    return ((get_user_model(), "u"), (Membership, "m"), (Tenant, "mt"))


# The statements of the token's and of a session's user read, by connection (each thread
# has its own) and by what they read.
_statements: WeakKeyDictionary = WeakKeyDictionary()


def _access_statement(read: Callable[[], tuple], source: Callable[..., tuple[str, str]]) -> tuple:
    """The SQL of a read of the user `u` with its membership `m`, its tenant `mt` and its
    highest role group (the last column, as with_access ranks them), and its columns (of
    `read`'s tables): built once a connection. `source(table, joined)` gives the statement's
    FROM (`u` in it) and its WHERE (`table` quotes a model's table name, `joined` writes a
    join of one)."""
    connection = connections[DEFAULT_DB_ALIAS]  # this thread's (sign-in reads the primary)
    made = _statements.setdefault(connection, {})
    if (found := made.get(read)) is not None:
        return found
    quote = connection.ops.quote_name
    columns = ModelColumns(connection, read())
    user = get_user_model()
    held = user._meta.get_field("groups").remote_field.through._meta
    held_user, held_group = (
        quote(held.get_field(name).column) for name in (user._meta.model_name, "group")
    )
    ranks = " ".join(f"WHEN '{role.value}' THEN {rank}" for rank, role in enumerate(_ROLE_ORDER))
    names = ", ".join(f"'{role.value}'" for role in _ROLE_ORDER)
    groups, holds = quote(Group._meta.db_table), quote(held.db_table)

    def table(model) -> str:
        return quote(model._meta.db_table)

    def joined(model, alias: str, on: str) -> str:  # `on`: the column naming its key
        return f"{table(model)} {alias} ON {alias}.{quote(model._meta.pk.column)} = {on}"

    member = Membership._meta.get_field
    user_pk = f"u.{quote(user._meta.pk.column)}"
    start, where = source(table, joined)
    sql = (
        f"SELECT {columns.select}, (SELECT g.name FROM {groups} g "  # noqa: S608 (names from the models)
        f"JOIN {holds} h ON h.{held_group} = g.{quote(Group._meta.pk.column)} "
        f"WHERE h.{held_user} = {user_pk} AND g.name IN ({names}) "
        f"ORDER BY CASE g.name {ranks} END LIMIT 1) {start} "
        f"LEFT JOIN {table(Membership)} m ON m.{quote(member('user').column)} = {user_pk} "
        f"LEFT JOIN {joined(Tenant, 'mt', 'm.' + quote(member('tenant').column))} {where}"
    )
    found = made[read] = (sql, columns)
    return found


def _token_source(table: Callable, joined: Callable) -> tuple[str, str]:
    quote, token = connections[DEFAULT_DB_ALIAS].ops.quote_name, ApiToken._meta.get_field
    return (
        f"FROM {table(ApiToken)} t "
        f"JOIN {joined(get_user_model(), 'u', 't.' + quote(token('user').column))} "
        f"LEFT JOIN {joined(Tenant, 'bt', 't.' + quote(token('bound_tenant').column))} "
        f"LEFT JOIN {joined(Project, 'bp', 't.' + quote(token('bound_project').column))}",
        f"WHERE t.{quote(token('digest').column)} = %s",
    )


def _user_source(table: Callable, joined: Callable) -> tuple[str, str]:
    quote, user = connections[DEFAULT_DB_ALIAS].ops.quote_name, get_user_model()
    return f"FROM {table(user)} u", f"WHERE u.{quote(user._meta.pk.column)} = %s"


def _access_row(
    read: Callable[[], tuple], source: Callable[..., tuple[str, str]], value
) -> list | None:
    """The instances of the access read of `read` and `source` given `value`, the user's
    relations cached as select_related caches them (None where the row is missing) and its
    role group on it; None without a row."""
    sql, columns = _access_statement(read, source)
    with statement_cursor() as cursor:
        cursor.execute(sql, [value])
        row = cursor.fetchone()
    if row is None:
        return None
    instances, (role_group,) = columns.read(row)
    by_alias = dict(zip((alias for _, alias in read()), instances, strict=True))
    user, membership = by_alias["u"], by_alias["m"]
    member = Membership._meta.get_field
    member("user").remote_field.set_cached_value(user, membership)
    if membership is not None:
        member("user").set_cached_value(membership, user)
        member("tenant").set_cached_value(membership, by_alias["mt"])
    setattr(user, _ROLE_GROUP, role_group)
    return instances


def token_with_access(digest: str) -> ApiToken | None:
    """The API token of `digest` as `with_access(…, user="user")` reads it with its user
    (take the user with `user_of`: its tenant and role group read with it), and what it is
    bound to, or None: one statement built once a connection, and prepared on PostgreSQL
    (the ORM spent a quarter of a gateway's budget read building and compiling it)."""
    read = _access_row(_token_read, _token_source, digest)
    if read is None:
        return None
    token, user, _, _, bound_tenant, bound_project = read
    field = ApiToken._meta.get_field
    field("user").set_cached_value(token, user)
    field("bound_tenant").set_cached_value(token, bound_tenant)
    field("bound_project").set_cached_value(token, bound_project)
    setattr(token, _ROLE_GROUP, getattr(user, _ROLE_GROUP))
    return cast(ApiToken, token)


def user_with_access(pk: object) -> AbstractBaseUser | None:
    """The user `pk` as `with_access` reads it (its tenant and role group with it), or None:
    a session's user, read at every page, in one statement built once a connection and
    prepared on PostgreSQL, as token_with_access."""
    read = _access_row(_user_read, _user_source, pk)
    return None if read is None else cast(AbstractBaseUser, read[0])


def _kept_on_user(attr: str):
    """Answer None for anonymous users; otherwise compute once per user object (a request's
    user) and keep the answer on it as `attr` (user_ensure drops it when roles change)."""

    def decorate(
        compute: Callable[[AbstractBaseUser], T],
    ) -> Callable[[AbstractBaseUser | AnonymousUser], T | None]:
        @wraps(compute)
        def read(user: AbstractBaseUser | AnonymousUser) -> T | None:
            if not user.is_authenticated:
                return None
            cached = getattr(user, attr, False)
            if cached is not False:
                return cached
            value = compute(user)
            setattr(user, attr, value)
            return value

        return read

    return decorate


def acting_user(user: AbstractBaseUser | AnonymousUser | None) -> AbstractBaseUser | None:
    """The user a write is recorded against (`created_by`, an audit entry's actor): None for
    a job, a command or an anonymous request."""
    return user if user is not None and user.is_authenticated else None


@_kept_on_user("_portal_role")
def user_role(user: AbstractBaseUser) -> Role | None:
    """The user's role: superusers are operators; otherwise the highest group held (read
    with the user when it was read by `with_access`)."""
    if user.is_superuser:
        return Role.OPERATOR
    held = getattr(user, _ROLE_GROUP, False)  # False: not read with the user
    names = set(user.groups.values_list("name", flat=True)) if held is False else {held}
    role = next((r for r in _ROLE_ORDER if r.value in names), None)
    if role is Role.TENANT and user_tenant(user) is None:
        return None  # a tenant member without a tenant sees nothing
    return role


def user_refusal(user: AbstractBaseUser | AnonymousUser) -> str | None:
    """Why a member of a suspended or closed tenant is refused everything (sessions, sign-in,
    tokens, every API call); None for everyone else (architecture.md, tenant status)."""
    tenant = user_tenant(user)
    if tenant is None or tenant.status == Tenant.Status.ACTIVE:
        return None
    return f"{tenant.name} is {tenant.get_status_display().lower()}: its members cannot sign in"


@_kept_on_user("_portal_tenant")
def user_tenant(user: AbstractBaseUser) -> Tenant | None:
    """The tenant a tenant member belongs to (None for staff roles and anonymous users)."""
    membership = getattr(user, "membership", None) if hasattr(user, "membership") else None
    return membership.tenant if membership else None


def user_may(user: AbstractBaseUser | AnonymousUser, capability: Capability) -> bool:
    role = user_role(user)
    return role is not None and role in CAPABILITIES[capability]


def tenant_scoped(
    queryset: QuerySet[M], *, user: AbstractBaseUser | AnonymousUser, field: str | None = "tenant"
) -> QuerySet[M]:
    """Rows of `queryset` the user may see: all for operators and finance, own tenant for
    members, none for everyone else. `field` is the path to the tenant (None: the row is one)."""
    role = user_role(user)
    if role in (Role.OPERATOR, Role.FINANCE):
        return queryset
    if role is Role.TENANT:
        tenant = user_tenant(user)
        return queryset.filter(**({"pk": tenant.pk} if field is None else {field: tenant}))
    return queryset.none()


def tenant_list(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Tenant]:
    """The tenants the user may see: every one for operators and finance, its own for a
    member, none for investors."""
    return tenant_scoped(Tenant.objects.all(), user=user, field=None)


def tenant_get(*, user: AbstractBaseUser | AnonymousUser, slug: str) -> Tenant:
    """The tenant named `slug` if the user may see it; 404 otherwise (never 403, not to leak).
    A member naming its own tenant gets the one read with it (no query: a gateway's budget
    read asks this before each request)."""
    own = user_tenant(user)
    if own is not None and own.slug == slug and user_role(user) is Role.TENANT:
        return own
    tenant = tenant_list(user=user).filter(slug=slug).first()
    if tenant is None:
        raise Http404(f"No tenant {slug!r}.")
    return tenant
