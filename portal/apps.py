from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Portal: tenants, roles, API tokens, audit"

    def ready(self):
        # The Celery app, so the apps' jobs send to its broker; loaded here, not in the
        # package's __init__, so the pure modules (portal.money…) import without Celery.
        from portal import celery, checks  # noqa: F401  (checks: registers the deploy checks)
        from portal.demo import Part, demo_steps_register

        demo_steps_register(
            Part.PEOPLE, "portal.demo.demo_tenants_and_users", "portal.demo.demo_notifications"
        )
