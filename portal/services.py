"""Writes of the base app: users and roles, API tokens, audit entries."""

import hashlib
import secrets
from collections.abc import Callable, Iterable
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Model
from django.forms.models import model_to_dict
from django.utils import timezone

from portal.access import TOKEN_SCOPES, acting_user, user_refusal, user_role, user_tenant
from portal.errors import FieldError
from portal.models import ApiToken, AuditEntry, Membership, Project, Role, Scope, Tenant

TOKEN_PREFIX = "tfp_"  # noqa: S105 (a marker, not a secret)


def token_digest(raw: str) -> str:
    """SHA-256 of a token: tokens carry 256 random bits, so a fast hash is enough at rest."""
    return hashlib.sha256(raw.encode()).hexdigest()


REDACTED = "(set)"  # what the audit log shows of a credential that is set


def credentials_redacted(snapshot: dict[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """`snapshot` with each credential of `fields` that is set shown as REDACTED: the log
    says a secret was set (or, by its action, rotated), never what it is."""
    return {
        key: (REDACTED if key in fields and value else value) for key, value in snapshot.items()
    }


def audit_snapshot(obj: Any) -> dict[str, Any]:
    """A JSON-safe copy of a model instance's fields, for the audit log; credentials (the
    model's CREDENTIAL_FIELDS) redacted."""
    import json

    snapshot = json.loads(json.dumps(model_to_dict(obj), cls=DjangoJSONEncoder, default=str))
    return credentials_redacted(snapshot, getattr(obj, "CREDENTIAL_FIELDS", ()))


def audit_record(
    *,
    actor: User | None,
    action: str,
    object_type: str,
    object_id: str,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> AuditEntry:
    """Append one audit entry (entries are never changed afterwards)."""
    return AuditEntry.objects.create(
        actor=acting_user(actor),
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        before=before,
        after=after,
    )


def audit_object(
    *,
    obj: Model,
    actor: User | None,
    action: str,
    object_type: str,
    before: dict[str, Any] | None = None,
) -> AuditEntry:
    """Audit a write that created or changed `obj`: named by its pk, with its snapshot now
    (and, for a change, `before`: the one taken before the write)."""
    return audit_record(
        actor=actor,
        action=action,
        object_type=object_type,
        object_id=str(obj.pk),
        before=before,
        after=audit_snapshot(obj),
    )


def slug_change_check(*, obj: Model, slug: str) -> None:
    """A slug is a name others hold (usage events, engines, URLs, exports): once any record
    refers to `obj`, its slug cannot change (a 400 naming `slug`)."""
    if slug == obj.slug:
        return
    for relation in obj._meta.related_objects:
        rows = relation.related_model._default_manager.filter(**{relation.field.name: obj})
        if rows.exists():
            raise FieldError(
                "slug",
                f"cannot change: {relation.related_model._meta.verbose_name_plural} refer to "
                f"{obj.slug!r}; create a new one instead",
            )


@transaction.atomic
def audited_save(
    *,
    store: Callable[[], Model],
    actor: User | None,
    object_type: str,
    before: Model | None = None,
    slug: str | None = None,
) -> Model:
    """Create or change an object through `store` (the app's service, or the model's save;
    it returns the object stored) and audit it: `before` is the row as stored before a
    change (None: a creation), `slug` the slug it is given, refused when the old one is
    already referred to (slug_change_check)."""
    snapshot = None
    if before is not None:
        if slug is not None:
            slug_change_check(obj=before, slug=slug)
        snapshot = audit_snapshot(before)
    obj = store()
    audit_object(
        obj=obj,
        actor=actor,
        action="create" if before is None else "update",
        object_type=object_type,
        before=snapshot,
    )
    return obj


def object_delete(
    *, obj: Model, actor: User | None, object_type: str, action: str = "delete"
) -> None:
    """Delete `obj` and audit it, named by its former pk, with its snapshot before."""
    before, pk = audit_snapshot(obj), obj.pk
    obj.delete()
    audit_record(
        actor=actor, action=action, object_type=object_type, object_id=str(pk), before=before
    )


@transaction.atomic
def user_ensure(
    *,
    username: str,
    role: Role,
    tenant: Tenant | None = None,
    password: str | None = None,
    actor: User | None = None,
) -> User:
    """Create the user if missing and give it exactly `role` (and its tenant for members)."""
    if role is Role.TENANT and tenant is None:
        raise ValidationError({"tenant": "A tenant member needs a tenant."})
    user, created = User.objects.get_or_create(username=username)
    if password is not None:
        user.set_password(password)
        user.save(update_fields=["password"])
    elif created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    before = sorted(user.groups.values_list("name", flat=True))
    user.groups.set([Group.objects.get_or_create(name=role.value)[0]])
    if role is Role.TENANT:
        Membership.objects.update_or_create(user=user, defaults={"tenant": tenant})
    else:
        Membership.objects.filter(user=user).delete()
    if created or before != [role.value]:
        audit_record(
            actor=actor,
            action="role_change",
            object_type="user",
            object_id=username,
            before={"groups": before},
            after={"groups": [role.value], "tenant": tenant.slug if tenant else None},
        )
    for attr in ("_portal_role", "_portal_tenant"):
        user.__dict__.pop(attr, None)
    return user


def _own_tenant_bound(user: User, bound_tenant: Tenant | None) -> Tenant:
    """A tenant member's ingest token is bound to its own tenant (architecture.md, roles):
    unbound it is bound there; bound to another tenant, refused naming the field (a project
    of another tenant is refused by token_create, naming bound_project)."""
    own = user_tenant(user)
    if own is None or (bound_tenant is not None and bound_tenant.pk != own.pk):
        raise ValidationError(
            {"bound_tenant": "A tenant member's ingest token is bound to its own tenant."}
        )
    return own


@transaction.atomic
def token_create(
    *,
    user: User,
    name: str,
    scopes: Iterable[str],
    bound_tenant: Tenant | None = None,
    bound_project: Project | None = None,
) -> tuple[ApiToken, str]:
    """Issue a token for `user` with `scopes` (limited by the user's role), an ingest token
    optionally bound to one tenant (`bound_tenant`: what it sends is metered to that tenant
    only) and to one of its projects (`bound_project`: its events without a project are that
    project's, naming another is refused); a member's ingest token is bound to its own
    tenant. Returns the row and the clear token, which is shown once and never stored."""
    if refusal := user_refusal(user):
        raise ValidationError({"user": refusal})
    wanted = sorted(set(scopes))
    role = user_role(user)
    allowed = TOKEN_SCOPES.get(role, frozenset()) if role else frozenset()
    if not wanted:
        raise ValidationError({"scopes": "Choose at least one scope."})
    refused = [s for s in wanted if s not in allowed]
    if refused:
        raise ValidationError(
            {
                "scopes": f"A {role.label if role else 'user without role'} may not create "
                f"tokens with scope {', '.join(refused)}."
            }
        )
    if role is Role.TENANT and Scope.INGEST in wanted:
        bound_tenant = _own_tenant_bound(user, bound_tenant)
    elif bound_project is not None and bound_tenant is None:
        bound_tenant = bound_project.tenant
    if bound_tenant is not None:
        if Scope.INGEST not in wanted:
            raise ValidationError(
                {"bound_tenant": "Only an ingest token can be bound to a tenant."}
            )
        if bound_tenant.status == Tenant.Status.CLOSED:
            raise ValidationError({"bound_tenant": f"Tenant {bound_tenant.slug!r} is closed."})
    if bound_project is not None and bound_project.tenant_id != bound_tenant.pk:
        raise ValidationError({"bound_project": f"Not a project of tenant {bound_tenant.slug!r}."})
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name.strip() or "token",
        prefix=raw[:12],
        digest=token_digest(raw),
        scopes=wanted,
        bound_tenant=bound_tenant,
        bound_project=bound_project,
    )
    tenant = user_tenant(user)
    audit_record(
        actor=user,
        action="issue_token",
        object_type="api_token",
        object_id=str(token.pk),
        after={
            "name": token.name,
            "scopes": wanted,
            "user": user.username,
            "tenant": tenant.slug if tenant else None,
            "bound_tenant": bound_tenant.slug if bound_tenant else None,
            "bound_project": bound_project.slug if bound_project else None,
        },
    )
    return token, raw


@transaction.atomic
def token_revoke(*, token: ApiToken, by: User) -> ApiToken:
    """Revoke a token; a revoked token is refused from then on."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(
            actor=by,
            action="revoke_token",
            object_type="api_token",
            object_id=str(token.pk),
            before={"revoked_at": None},
            after={"revoked_at": token.revoked_at.isoformat()},
        )
    return token
