from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Portal: tenants, roles, API tokens, audit"

    def ready(self):
        from portal import checks  # noqa: F401  (registers the deploy checks)
