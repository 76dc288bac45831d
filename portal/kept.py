"""Values kept in the shared cache under a key that names the data they were made from,
exactly: a change to that data changes the key, so a kept value is never stale, only
unused. Pages keep what is costly to make and cheap to name (a chart's JSON, a month's sums
read under a stamp of the rows they sum)."""

import hashlib
import logging
from collections.abc import Callable, Hashable
from typing import TypeVar

from django.core.cache import cache

log = logging.getLogger(__name__)

KEPT_SECONDS = 15 * 60  # how long a value is kept

T = TypeVar("T")


def kept(key: Hashable, build: Callable[[], T]) -> T:
    """The value kept under `key`, made by `build` and kept on a miss. `key` names the data
    the value is made from, exactly (a change to that data must change the key); it is kept
    KEPT_SECONDS, so a value made by an older release of the code is gone within that much
    of a deployment. Without the cache (Redis down), the value is made for each read: a
    page is slower, never broken."""
    name = "kept:" + hashlib.sha256(repr(key).encode()).hexdigest()
    try:
        value = cache.get(name)
    except Exception:  # the cache is unavailable: make it here
        log.warning("cache unavailable for kept values", exc_info=True)
        return build()
    if value is None:
        value = build()
        try:
            cache.set(name, value, KEPT_SECONDS)
        except Exception:
            log.warning("cache unavailable for kept values", exc_info=True)
    return value
