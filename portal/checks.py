"""System checks of the portal's deployment (`manage.py check --deploy`)."""

from django.conf import settings
from django.core import checks

from portal.security import CACHE_ALIAS

# Cache backends whose counts live in one process (or nowhere).
PER_PROCESS_CACHES = frozenset(
    {
        "django.core.cache.backends.locmem.LocMemCache",
        "django.core.cache.backends.dummy.DummyCache",
    }
)


@checks.register(checks.Tags.caches, checks.Tags.security, deploy=True)
def shared_cache_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """portal.W001: login lockout and API quotas need a cache every process shares."""
    backend = settings.CACHES.get(CACHE_ALIAS, {}).get("BACKEND", "")
    if backend not in PER_PROCESS_CACHES:
        return []
    return [
        checks.Warning(
            f"The cache that counts sign-in failures and API quotas "
            f"(CACHES[{CACHE_ALIAS!r}]) is {backend}: each process counts on its own, so "
            "failures spread over processes never lock an account out and every process "
            "grants the full quota.",
            hint="Set REDIS_URL so that every process shares one Redis cache.",
            id="portal.W001",
        )
    ]
