"""Test-only Celery tasks, imported by the reliability suite's worker (--include)."""

import os

import redis
from celery import shared_task

MAX_RETRIES = 2


@shared_task(
    name="tests.reliability.always_fails",
    bind=True,
    acks_late=True,
    max_retries=MAX_RETRIES,
    time_limit=30,
)
def always_fails_task(self, key: str) -> None:
    """Count the attempt in the broker's Redis under `key`, then fail; retried
    MAX_RETRIES times (as a transient error would be), then recorded as failed."""
    redis.Redis.from_url(os.environ["CELERY_BROKER_URL"]).incr(key)
    raise self.retry(exc=RuntimeError("always fails"), countdown=0.2)
