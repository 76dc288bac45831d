"""DRF permissions: token scopes and role capabilities."""

from rest_framework import permissions

from portal.access import Capability, user_may
from portal.models import ApiToken, Scope


class TokenScopePermission(permissions.BasePermission):
    """A token request needs the view's scope: `read` for safe methods, `write_scope` (default
    `admin`) otherwise. Session requests are governed by role capabilities alone."""

    message = "This token lacks the scope this operation needs."

    def has_permission(self, request, view) -> bool:
        if not isinstance(request.auth, ApiToken):
            return True
        if request.method in permissions.SAFE_METHODS:
            needed = Scope.READ
        else:
            needed = getattr(view, "write_scope", Scope.ADMIN)
        self.message = f"This token lacks the '{needed}' scope."
        return needed in request.auth.scopes


def capability_permission(*, read: Capability, write: Capability | None = None):
    """A permission class for a view: the user must be signed in, a token must carry the
    operation's scope, and the role must have `read` (safe methods) or `write` (others;
    None: the resource is read-only)."""

    class CapabilityPermission(TokenScopePermission):
        def has_permission(self, request, view) -> bool:
            if not (request.user and request.user.is_authenticated):
                return False
            if not super().has_permission(request, view):
                return False
            self.message = "Your role may not do this."
            if request.method in permissions.SAFE_METHODS:
                return user_may(request.user, read)
            return write is not None and user_may(request.user, write)

    CapabilityPermission.__name__ = f"May{read.title().replace('_', '')}"
    return CapabilityPermission


class UnboundToken(permissions.BasePermission):
    """Factory-wide writes a tenant's gateway has no business making (pools' telemetry and
    capacity): refused to a token bound to a tenant, which meters that tenant's usage only
    (architecture.md: an `ingest` token may be bound to one tenant, for its gateway)."""

    message = (
        "This token is bound to a tenant: it sends that tenant's usage only, not pools' "
        "telemetry or capacity."
    )

    def has_permission(self, request, view) -> bool:
        return getattr(request.auth, "bound_tenant_id", None) is None
