"""Metering jobs (thin adapters over services)."""

import logging

from metering.services.telemetry.scrape import scrape_all
from metering.services.usage.archive import usage_archive
from metering.services.usage.rejections import rejections_purge
from metering.services.usage.rollup import usage_fold
from portal import clock
from portal.celery import job_task
from portal.pipeline import FOLD, stage_begin

log = logging.getLogger(__name__)


@job_task("metering.scrape_targets", soft_time_limit=25, time_limit=28)
def scrape_targets_task() -> None:
    """Scrape every enabled Prometheus target once (metering.telemetry.scrape_all).

    No retries: the next beat, 30 s later, is the retry, and a failing target is recorded
    on the target, not raised. Running twice only adds the increase since the last run."""
    outcomes = scrape_all(now=clock.now())
    failed = [outcome.url for outcome in outcomes if not outcome.is_ok]
    log.info("scrape: %d targets, %d failed %s", len(outcomes), len(failed), failed or "")


@job_task(FOLD, time_limit=600)
def fold_task() -> None:
    """The fold stage: add accepted events to the rollups and append what changed to
    metering's change log (metering.services.usage.rollup.usage_fold). Each batch claims its
    events in the transaction that adds them: a killed run leaves them queued, and a rerun
    folds each event once. No retries: the beat runs it every minute."""
    stage_begin(FOLD)
    folded = usage_fold()
    if folded:
        log.info("fold: %d events", folded)


@job_task("metering.retention", time_limit=6 * 3600)
def retention_task() -> None:
    """The daily retention job (architecture.md, jobs): the raw usage events of closed months
    past retention archived to Parquet and dropped (metering.services.usage.archive), and
    the ingestion debugger's rejections older than 7 days purged (5-minute rollups are
    purged by the fold). Running twice archives and purges nothing more."""
    now = clock.now()
    usage_archive(now=now)
    purged = rejections_purge(now=now)
    if purged:
        log.info("retention: %d rejections purged", purged)
