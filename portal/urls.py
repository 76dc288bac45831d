from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal.admin import site as admin_site
from portal.middleware import not_an_export
from portal.views import alerts, notify, shell

api_v1 = [
    path("", include("portal.api.urls")),
    path("", include("metering.api.urls")),
    path("", include("billing.api.urls")),
    path("", include("flywheel.api.urls")),
]

urlpatterns = [
    path("", shell.home, name="home"),
    path("login/", shell.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("tokens/", shell.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", shell.token_revoke_view, name="token-revoke"),
    path("audit/", shell.audit, name="audit"),
    path("inbox/", notify.inbox, name="inbox"),
    path("inbox/<int:pk>/open/", notify.inbox_open, name="inbox-open"),
    path("alerts/", alerts.alerts, name="alerts"),
    path("alerts/rules/", alerts.rule_new, name="alert-rule-new"),
    path("alerts/rules/<int:pk>/", alerts.rule_action, name="alert-rule"),
    path("notifications/", notify.notifications, name="notifications"),
    path(
        "notifications/endpoints/<int:pk>/",
        notify.endpoint_deliveries,
        name="endpoint-deliveries",
    ),
    path("notifications/deliveries/<int:pk>/replay/", notify.replay, name="delivery-replay-page"),
    path("", include("metering.urls")),
    path("billing/", include("billing.urls")),
    path("", include("flywheel.urls")),
    path("admin/", admin_site.urls),
    path("api/v1/", include(api_v1)),
    path("api/schema/", not_an_export(SpectacularAPIView.as_view()), name="api-schema"),
    path(
        "api/docs/",
        login_required(SpectacularSwaggerSplitView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
]

handler403 = "portal.views.shell.permission_denied"
handler404 = "portal.views.shell.page_not_found"
handler500 = "portal.views.shell.server_error"
