"""The portal's clock: the one "now" of domain code (periods, ingestion bounds, jobs, invoices).

`now()` is the real time unless a test clock is set. Tests set it through one fixture
(`now` in tests/conftest.py, with `clock_set`); the servers, workers and demos that tests start
read the same instant from the `PORTAL_NOW` setting, which only DEBUG honours (production always
runs on the real clock; settings refuse PORTAL_NOW with DEBUG off). A test clock stands still:
an instant, so every figure a test computes from it is exact.

Protocol clocks stay on the real clock: session ages, API token use and revocation, sign-in
lockout windows, audit entries and the `created_at` of records say when something really
happened, not which business period it belongs to.
"""

from datetime import UTC, datetime

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

_test_now: datetime | None = None


def parse_instant(value: str) -> datetime:
    """An RFC 3339 instant with a zone (as `PORTAL_NOW` is written), in UTC."""
    parsed = parse_datetime(value.strip())
    if parsed is None or parsed.tzinfo is None:
        raise ValueError(f"{value!r} is not an RFC 3339 date-time with a zone")
    return parsed.astimezone(UTC)


def now() -> datetime:
    """The current instant for domain code: the test clock when one is set, else real UTC."""
    if _test_now is not None:
        return _test_now
    configured = getattr(settings, "PORTAL_NOW", None)
    return configured if configured is not None else timezone.now()


def clock_set(moment: datetime | None) -> None:
    """Stand the clock still at `moment` (None: back to the settings' clock)."""
    global _test_now
    if moment is not None and moment.tzinfo is None:
        raise ValueError("the test clock needs an aware datetime")
    _test_now = moment.astimezone(UTC) if moment is not None else None
