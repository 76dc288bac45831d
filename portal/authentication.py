"""Who a request is: a browser session's user (`SessionUserBackend`) and
`Authorization: Bearer <token>` for the DRF API. Both read the user, its tenant and its role
in one query."""

from datetime import timedelta

from django.contrib.auth.backends import ModelBackend
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from portal.access import token_with_access, user_of, user_refusal, user_with_access
from portal.models import ApiToken
from portal.services import token_digest


class SessionUserBackend(ModelBackend):
    """Django's model backend (sign-in, permissions), reading a session's user with its
    tenant and role: one prepared statement on every page instead of three queries."""

    def get_user(self, user_id):
        user = user_with_access(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """Authenticates an API token; `request.auth` is then the ApiToken (its scopes apply)."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("Token must be ASCII.") from exc
        # With what it is bound to (every ingestion request asks), in one prepared statement.
        token = token_with_access(token_digest(raw))
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("Token has been revoked.")
        user = user_of(token)
        if not user.is_active:
            raise exceptions.AuthenticationFailed("User is inactive.")
        if refusal := user_refusal(user):
            raise exceptions.AuthenticationFailed(refusal)
        now = timezone.now()
        # Touch last use at most once a minute, so reads stay read-only in the common case.
        if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return user, token

    def authenticate_header(self, request):
        return self.keyword


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "portal.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer"}
