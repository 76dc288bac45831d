"""Login lockout and API quotas, counted in the shared cache (Redis in production).

Both fail open when the cache is down: a Redis outage must not lock everybody out or
turn API calls into errors (the database, not the cache, is the record)."""

from __future__ import annotations

import hashlib
import logging

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.cache import caches
from django.utils.connection import ConnectionProxy
from rest_framework.throttling import SimpleRateThrottle

from portal.models import ApiToken, Scope

log = logging.getLogger(__name__)
# The cache alias both count in. Every web process must share it (Redis: REDIS_URL), or
# failures spread over processes never lock and each process grants the full quota; the
# deploy check portal.W001 (portal.checks) warns when it is per process.
CACHE_ALIAS = "default"
cache = ConnectionProxy(caches, CACHE_ALIAS)
IP_LIMIT_FACTOR = 4


def _key(prefix: str, value: str) -> str:
    return f"{prefix}:{hashlib.sha256(value.encode()).hexdigest()[:32]}"


def _account(username: str) -> str:
    """The account a sign-in names, as authentication reads it: surrounding whitespace
    stripped, NFKC-normalized (AbstractBaseUser.normalize_username), case kept (a case-folded
    counter would let one account's failures lock another): one counter per account,
    whatever the spelling."""
    return AbstractBaseUser.normalize_username(username.strip())


def _safely(default, fn, *args):
    try:
        return fn(*args)
    except Exception:  # the cache is unavailable: fail open, log once per call
        log.warning("cache unavailable for login lockout or quotas", exc_info=True)
        return default


def login_locked_for(*, username: str, ip: str) -> int:
    """Seconds the username or the address is still locked out (0: may try). An address
    may fail IP_LIMIT_FACTOR times more often than one username: offices share addresses."""
    limit = settings.LOGIN_FAILURE_LIMIT
    for key, most in (
        (_key("login-fail-user", _account(username)), limit),
        (_key("login-fail-ip", ip), limit * IP_LIMIT_FACTOR),
    ):
        failures = _safely(0, cache.get, key) or 0
        if failures >= most:
            ttl = _safely(None, getattr(cache, "ttl", lambda k: None), key)
            return int(ttl) if ttl else settings.LOGIN_LOCKOUT_SECONDS
    return 0


def login_failed(*, username: str, ip: str) -> None:
    """Count a failure against the username and the address (window: the lockout time)."""
    for key in (_key("login-fail-user", _account(username)), _key("login-fail-ip", ip)):
        _safely(None, cache.add, key, 0, settings.LOGIN_LOCKOUT_SECONDS)
        _safely(None, cache.incr, key)


def login_succeeded(*, username: str) -> None:
    _safely(None, cache.delete, _key("login-fail-user", _account(username)))


class QuotaThrottle(SimpleRateThrottle):
    """Per token (or per signed-in user) request quotas by kind: `ingest` for ingestion
    views, `write` for other non-GET requests, `read` otherwise; 429 with Retry-After.

    Counted as a sliding window over two fixed ones: a request is let through while the
    count of the current window, plus the previous window's weighted by the share of it the
    sliding window still covers, stays within the quota. Each request is one atomic
    increment of one counter, so concurrent requests are all counted (a list of request
    times read and written back loses the requests that land in between) and the cost does
    not grow with the quota. A refused request is taken back off the count."""

    def get_rate(self):  # the rate depends on the request; set in allow_request
        return None

    def allow_request(self, request, view):
        if request.method in ("GET", "HEAD", "OPTIONS"):
            self.scope = "read"
        elif getattr(view, "write_scope", None) == Scope.INGEST:
            self.scope = "ingest"
        else:
            self.scope = "write"
        self.rate = self.THROTTLE_RATES.get(self.scope)
        self.num_requests, self.duration = self.parse_rate(self.rate)
        self.retry_after: float | None = None
        return _safely(True, self._allow, self.get_cache_key(request, view))

    def _allow(self, key: str) -> bool:
        limit, duration = self.num_requests, self.duration
        window, into = divmod(self.timer(), duration)
        current, previous = f"{key}:{int(window)}", f"{key}:{int(window) - 1}"
        # Kept until the next window has used it as its previous one.
        if counted := getattr(cache, "window_count", None):  # Redis: one round trip
            before, count = counted(previous, current, 2 * duration)
        else:
            counts = cache.get_many([previous, current])
            before = counts.get(previous, 0)
            # Added when missing, increased otherwise: each an atomic step, the increase at
            # the second try when another request added it in between.
            if current not in counts and cache.add(current, 1, 2 * duration):
                count = 1
            else:
                count = cache.incr(current)
        weight = 1 - into / duration
        if before * weight + count <= limit:
            return True
        cache.decr(current)
        # At least a second: a refusal always says when to come back (a wait that rounds to
        # zero or below at a window's edge would leave Retry-After out).
        self.retry_after = max(
            1.0,
            _quota_wait(limit=limit, duration=duration, into=into, before=before, count=count - 1),
        )
        return False

    def wait(self):
        return self.retry_after

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiToken):
            ident = f"token-{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            ident = f"ip-{self.get_ident(request)}"
        return f"quota:{self.scope}:{ident}"


def _quota_wait(*, limit: int, duration: int, into: float, before: int, count: int) -> float:
    """Seconds until one more request fits, `into` seconds into a window holding `count`
    requests after a previous one holding `before`: later in this window, as the previous
    window's weight falls; else in the next one, once the weight of this window's count
    has fallen far enough."""
    if count + 1 <= limit:  # only the previous window's weight stands in the way
        return duration * (1 - (limit - count - 1) / before) - into
    return duration - into + duration * max(0.0, 1 - (limit - 1) / max(count, 1))
