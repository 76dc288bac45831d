from collections.abc import Callable
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied

from portal.access import user_role
from portal.models import Role


def role_required(*roles: Role) -> Callable:
    """Page views: anonymous users go to login; other roles get 403."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if user_role(request.user) not in roles:
                raise PermissionDenied("Your role may not open this page.")
            return view(request, *args, **kwargs)

        wrapped.portal_roles = frozenset(roles)
        return wrapped

    return decorator
