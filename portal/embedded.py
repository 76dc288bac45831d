"""The embedded default (no broker, so no beat; Celery runs eagerly): once a write that
feeds the figures commits, the jobs the beat would run next run in-process, in order
(settings.EMBEDDED_JOBS), so the next read is exact. Each job does nothing when nothing it
reads changed. With a broker, the beat's jobs do the same work on their schedule."""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string

_deferred: ContextVar[bool] = ContextVar("embedded_jobs_deferred", default=False)


def jobs_after_commit() -> None:
    """In the embedded default, run settings.EMBEDDED_JOBS once the caller's transaction
    commits (robust: the write is stored; a failed job is redone by the next write or
    `manage.py measure`, and never changes the write's answer). A second write in the same
    transaction runs them again, finding little left to do. With a broker, or inside
    `jobs_deferred`, nothing."""
    if settings.CELERY_TASK_ALWAYS_EAGER and not _deferred.get():
        transaction.on_commit(_jobs_run, robust=True)


@contextmanager
def jobs_deferred() -> Iterator[None]:
    """Writes inside run no jobs after they commit: for a bulk load that measures what it
    loaded at its end (`manage.py demo`)."""
    token = _deferred.set(True)
    try:
        yield
    finally:
        _deferred.reset(token)


def _jobs_run() -> None:
    for path in settings.EMBEDDED_JOBS:
        import_string(path)()
