from django.conf import settings

from portal.access import user_role, user_tenant
from portal.events import inbox_unread_count
from portal.shell import nav_for


def shell(request):
    """Role, tenant and navigation for the base layout."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"portal_currency": settings.FACTORY_CURRENCY}
    role = user_role(user)
    nav = nav_for(role, request.path)
    for item in nav:
        if item["url_name"] == "inbox":  # the unread count beside it (one query)
            item["count"] = inbox_unread_count(user=user)
    return {
        "portal_role": role,
        "portal_tenant": user_tenant(user),
        "portal_nav": nav,
        "portal_currency": settings.FACTORY_CURRENCY,
    }
