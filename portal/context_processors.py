from django.conf import settings

from portal.access import user_role, user_tenant
from portal.nav import nav_for


def shell(request):
    """Role, tenant and navigation for the base layout."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"portal_currency": settings.FACTORY_CURRENCY}
    role = user_role(user)
    return {
        "portal_role": role,
        "portal_tenant": user_tenant(user),
        "portal_nav": nav_for(role, request.path),
        "portal_currency": settings.FACTORY_CURRENCY,
    }
