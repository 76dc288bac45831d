"""Scrape the enabled targets' `/metrics` pages and record each one's success or failure."""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Final
from urllib.parse import urlsplit

from celery.exceptions import SoftTimeLimitExceeded
from django.db import transaction
from django.db.models import F

from metering.models import ScrapeTarget
from metering.services.telemetry.ingest import (
    MAX_EXPOSITION_BYTES,
    ExpositionTooLarge,
    TelemetryResult,
    telemetry_ingest,
)

log = logging.getLogger(__name__)

MAX_ERROR_CHARS: Final = 2000

Fetch = Callable[[str, float], str]


@dataclass(frozen=True, slots=True)
class ScrapeOutcome:
    """The result of scraping one target: `result` when stored, `error` when it failed."""

    target_id: int
    url: str
    is_ok: bool
    error: str = ""
    result: TelemetryResult | None = None


def fetch_metrics(url: str, timeout_s: float) -> str:
    """GET an http(s) `/metrics` page as text; raises OSError/ValueError on any failure."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(f"only http and https URLs can be scraped, got {url!r}")
    request = urllib.request.Request(  # noqa: S310  (scheme checked above)
        url, headers={"Accept": "text/plain;version=0.0.4", "User-Agent": "token-factory-portal"}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
        body = response.read(MAX_EXPOSITION_BYTES + 1)
        charset = response.headers.get_content_charset() or "utf-8"
    if len(body) > MAX_EXPOSITION_BYTES:
        raise ExpositionTooLarge(f"the page is larger than {MAX_EXPOSITION_BYTES} bytes")
    return body.decode(charset)


def scrape_target(
    *, target: ScrapeTarget, now: datetime, fetch: Fetch = fetch_metrics
) -> ScrapeOutcome:
    """Fetch and store one target; never raises. A failure marks the target `failed` with
    the error and counts it in `consecutive_failures`; a success resets both."""
    text, error = _attempt_fetch(target=target, fetch=fetch)
    return _scrape_record(target=target, now=now, text=text, error=error)


def scrape_all(
    *, now: datetime, fetch: Fetch = fetch_metrics, max_workers: int = 16
) -> list[ScrapeOutcome]:
    """Scrape every enabled target once: fetch them concurrently, then store each in its own
    transaction. One target's failure never stops the others."""
    targets = list(
        ScrapeTarget.objects.filter(enabled=True)
        .select_related("pool", "deployment")
        .order_by("pk")
    )
    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=min(max_workers, len(targets))) as executor:
        # Interrupted by the task's soft time limit (Celery raises it in this thread),
        # map's iterator cancels the fetches not started; running ones end by timeout.
        fetched = list(executor.map(lambda t: _attempt_fetch(target=t, fetch=fetch), targets))
    return [
        _scrape_record(target=target, now=now, text=text, error=error)
        for target, (text, error) in zip(targets, fetched, strict=True)
    ]


def _attempt_fetch(*, target: ScrapeTarget, fetch: Fetch) -> tuple[str | None, Exception | None]:
    try:
        return fetch(target.url, float(target.timeout_s)), None
    except Exception as error:  # any fetch failure is the target's, recorded on it
        return None, error


def _scrape_record(
    *, target: ScrapeTarget, now: datetime, text: str | None, error: Exception | None
) -> ScrapeOutcome:
    if error is None and text is not None:
        try:
            with transaction.atomic():
                result = telemetry_ingest(
                    text=text, kind=target.kind, pool=target.pool, target=target, now=now
                )
                ScrapeTarget.objects.filter(pk=target.pk).update(
                    last_scraped_at=now,
                    last_status=ScrapeTarget.Status.OK,
                    last_error="",
                    consecutive_failures=0,
                    last_skipped=[{"family": f, "reason": r} for f, r in result.skipped],
                    last_unknown_models=list(result.unknown_models),
                )
            return ScrapeOutcome(target_id=target.pk, url=target.url, is_ok=True, result=result)
        except SoftTimeLimitExceeded:
            raise
        except Exception as ingest_error:  # a bad page must not stop the other targets
            log.exception("scrape: storing %s failed", target.url)
            error = ingest_error
    message = _describe(error)
    log.warning("scrape: %s failed: %s", target.url, message)
    try:
        ScrapeTarget.objects.filter(pk=target.pk).update(
            last_scraped_at=now,
            last_status=ScrapeTarget.Status.FAILED,
            last_error=message,
            consecutive_failures=F("consecutive_failures") + 1,
        )
    except SoftTimeLimitExceeded:
        raise
    except Exception:  # the database itself is down: nothing more to record
        log.exception("scrape: could not record the failure of %s", target.url)
    return ScrapeOutcome(target_id=target.pk, url=target.url, is_ok=False, error=message)


def _describe(error: BaseException | None) -> str:
    if error is None:
        return "no content"
    return f"{type(error).__name__}: {error}"[:MAX_ERROR_CHARS]
