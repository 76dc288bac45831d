"""The shared cache on Redis: Django's backend with one Redis client a connection pool.

Django's Redis backend makes a `redis.Redis` client for every operation, and a client fills
a table of some 170 reply parsers when it is made: about a third of a millisecond each time,
several times a page (kept charts and sums, quotas). A client holds no connection of its own
(its pool does) and may be shared by threads; each thread has its own cache backend anyway
(django.core.cache.caches)."""

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class _Client(RedisCacheClient):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class RedisCache(DjangoRedisCache):
    """settings.CACHES' backend when REDIS_URL is set."""

    def __init__(self, server, params) -> None:
        super().__init__(server, params)
        self._class = _Client

    def window_count(self, previous: str, current: str, timeout: int) -> tuple[int, int]:
        """Count one more in the counter `current` (made to last `timeout` seconds when it
        is missing) and read the counter `previous` (0 when missing): an API quota's step
        (portal.security), in one round trip where Django's get_many, add and incr take two
        or three. Counters are stored as Django stores integers (plain, so INCR counts)."""
        before_key, key = (self.make_and_validate_key(name) for name in (previous, current))
        client = self._cache.get_client(key, write=True)
        with client.pipeline(transaction=True) as pipe:
            pipe.get(before_key)
            pipe.set(key, 0, ex=timeout, nx=True)
            pipe.incr(key)
            before, _, count = pipe.execute()
        return (0 if before is None else int(before)), count
