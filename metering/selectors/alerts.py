"""Metering's alert kinds (kpis.md section 3c; architecture.md "Alerts and notifications"):
reconciliation drift, a silent source, a scrape target down. Each evaluation reads
metering's read models (the reconciled deployment-hours, the sources seen, the scrape
targets' health), never raw usage events, in a number of queries that does not grow with
rules, deployments, sources or targets. All three are condition kinds (portal.alerts):
a finding names when its condition began and one alert fires while it holds. The scope
checks refuse what does not exist, naming `scope.<x>`."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.urls import reverse

from metering.domain.alerts import DRIFT_HOURS, SCRAPE_FAILURES, SILENT_MINUTES
from metering.domain.usage.sources import RECENT, SourceState, source_state
from metering.models import Deployment, ScrapeTarget, SourceSeen
from metering.selectors.ingestion import SourceRow, source_list
from metering.selectors.telemetry import (
    ReconciliationRow,
    ScrapeTargetHealth,
    reconciliation_list,
    reconciliation_tolerance,
    scrape_target_health,
)
from metering.selectors.usage import usage_metered_until
from portal.alert_kinds import Evaluation, Finding, scope_naming
from portal.formatting import rfc3339
from portal.models import AlertRule
from portal.periods import hour_floor

HOUR = timedelta(hours=1)
# How far before a rule's N hours the start of a run of flagged hours is sought: a longer
# run names the start of this look-back (its alert, already firing, continues all the same).
RUN_LOOKBACK = timedelta(hours=24)


def _scrape_every() -> timedelta:
    """The beat's "scrape" cadence (settings.CELERY_BEAT_SCHEDULE)."""
    return timedelta(seconds=settings.CELERY_BEAT_SCHEDULE["scrape"]["schedule"])


# ---------------------------------------------------------------- reconciliation drift


deployment_scope_check = scope_naming(
    "deployment",
    exists=lambda slug: Deployment.objects.filter(slug=slug).exists(),
    expected="the slug of a deployment",
)


def reconciliation_drift_evaluate(rules: list[AlertRule], now: datetime) -> Evaluation:
    """`reconciliation_drift`: a deployment whose last N whole hours (default 2), ending at
    the last whole hour the fold covers (usage_metered_until), are each flagged by
    reconciliation_list (data-formats.md §8.8; an hour without engine data is not flagged)
    is a finding of every rule watching it: scope {} every deployment (scope key: its slug),
    or {"deployment": slug}. Threshold N; window start the first hour of its run of flagged
    hours (sought RUN_LOOKBACK before the N at most); figures the N hours' engine and
    metered output tokens and their difference. At most 5 queries: the fold's horizon (2)
    and the reconciled hours (3), however many rules and deployments."""
    end = hour_floor(usage_metered_until(now=now))
    longest = max(rule.params.get("hours", DRIFT_HOURS) for rule in rules)
    start = end - longest * HOUR - RUN_LOOKBACK
    flagged: dict[str, dict[datetime, ReconciliationRow]] = defaultdict(dict)
    for row in reconciliation_list(start=start, end=end):
        if row.is_flagged:
            flagged[row.deployment][row.hour] = row
    ratio, tokens = reconciliation_tolerance()
    tolerance = {"tolerance_ratio": str(ratio), "tolerance_tokens": tokens}
    findings = []
    for rule in rules:
        hours = rule.params.get("hours", DRIFT_HOURS)
        last = [end - n * HOUR for n in range(hours, 0, -1)]  # oldest first
        slugs = [rule.scope["deployment"]] if "deployment" in rule.scope else sorted(flagged)
        for slug in slugs:
            rows = flagged.get(slug, {})
            if not all(hour in rows for hour in last):
                continue
            onset = last[0]
            while onset - HOUR in rows:
                onset -= HOUR
            findings.append(
                _drift_finding(rule, slug, [rows[hour] for hour in last], onset, tolerance)
            )
    return Evaluation(findings=findings)


def _drift_finding(
    rule: AlertRule, slug: str, rows: list[ReconciliationRow], onset: datetime, tolerance: dict
) -> Finding:
    newest = rows[-1]
    value = f"{newest.difference_pct:+.1f}%"
    return Finding(
        rule=rule,
        scope_key=slug,
        window_start=onset,
        threshold=str(len(rows)),
        value=value,
        summary=(
            f"{slug}: engine and metered output tokens disagree beyond tolerance in each of "
            f"the last {len(rows)} whole hours (flagged since {onset:%d %b %H:%M} UTC); "
            f"{newest.hour:%H:%M}: engine {newest.engine_output_tokens:,}, metered "
            f"{newest.metered_output_tokens:,} ({value})"
        ),
        figures={
            "hours": [
                {
                    "hour": rfc3339(row.hour),
                    "engine_output_tokens": row.engine_output_tokens,
                    "metered_output_tokens": row.metered_output_tokens,
                    "difference": row.difference,
                }
                for row in rows
            ],
            **tolerance,
        },
        link=reverse("metering") + "#reconciliation",
    )


# ---------------------------------------------------------------- source silent


source_silent_scope_check = scope_naming(
    "source",
    exists=lambda name: SourceSeen.objects.filter(source=name).exists(),
    expected="the name of a source that has sent usage",
)


def source_silent_evaluate(rules: list[AlertRule], now: datetime) -> Evaluation:
    """`source_silent`: a source that sent usage in the last 24 h and none for N minutes
    (default 15) while the engine counters of its deployments grew (the one rule,
    metering.domain.usage.sources.source_state, told N; the growth as the metering page
    reads it, selectors.ingestion.source_list) is a finding of every rule watching it:
    scope {} every source (scope key: its name), or {"source": name}. Threshold N; window
    start its last batch received + N minutes, when it turned silent by the rule. 2
    queries however many rules and sources."""
    sources = {row.source: row for row in source_list(now=now, since=now - RECENT)}
    findings = []
    for rule in rules:
        minutes = rule.params.get("minutes", SILENT_MINUTES)
        names = [rule.scope["source"]] if "source" in rule.scope else sorted(sources)
        for name in names:
            row = sources.get(name)
            if row is None:
                continue  # not sent anything for a day: no longer expected to send
            state = source_state(
                last_received_at=row.last_received_at,
                now=now,
                engines_grew=bool(row.grown),
                quiet_for=timedelta(minutes=minutes),
            )
            if state is SourceState.SILENT:
                findings.append(_silent_finding(rule, row, minutes, now))
    return Evaluation(findings=findings)


def _silent_finding(rule: AlertRule, row: SourceRow, minutes: int, now: datetime) -> Finding:
    received = row.last_received_at
    quiet = int((now - received) / timedelta(minutes=1))
    return Finding(
        rule=rule,
        scope_key=row.source,
        window_start=received + timedelta(minutes=minutes),
        threshold=str(minutes),
        value=f"{quiet} min",
        summary=(
            f"Source {row.source} has sent no usage for {quiet} minutes (last batch "
            f"{received:%d %b %H:%M} UTC) while the engines of {', '.join(row.grown)} keep "
            "generating"
        ),
        figures={
            "last_received_at": rfc3339(received),
            "last_event_at": rfc3339(row.last_event_at),
            "quiet_minutes": quiet,
            "deployments": row.grown,
            "engine_observed_at": rfc3339(row.engine_observed_at),
        },
        link=reverse("metering") + "#ingestion",
    )


# ---------------------------------------------------------------- scrape down


scrape_down_scope_check = scope_naming(
    "scrape_target",
    exists=lambda pk: ScrapeTarget.objects.filter(pk=pk).exists(),
    expected="the id of a scrape target",
    of_type=int,
)


def scrape_down_evaluate(rules: list[AlertRule], now: datetime) -> Evaluation:
    """`scrape_down`: an enabled target whose last N scrapes (default 4) or more failed
    (ScrapeTarget.consecutive_failures, through scrape_target_health) is a finding of
    every rule watching it: scope {} every enabled target (scope key: its id), or
    {"scrape_target": id}. Threshold N. Window start when its failing began, estimated
    (no time of a first failure is stored) as its last scrape less one scrape interval
    (the scrape cadence) for each failure before it. 1 query however many rules and targets."""
    targets = sorted(
        (row for row in scrape_target_health(now=now) if row.enabled), key=lambda row: row.id
    )
    findings = []
    for rule in rules:
        failures = rule.params.get("failures", SCRAPE_FAILURES)
        watched = targets
        if "scrape_target" in rule.scope:
            watched = [row for row in targets if row.id == rule.scope["scrape_target"]]
        for target in watched:
            if target.consecutive_failures >= failures and target.last_scraped_at:
                findings.append(_scrape_finding(rule, target, failures))
    return Evaluation(findings=findings)


def _scrape_finding(rule: AlertRule, target: ScrapeTargetHealth, failures: int) -> Finding:
    count = target.consecutive_failures
    began = target.last_scraped_at - (count - 1) * _scrape_every()
    return Finding(
        rule=rule,
        scope_key=str(target.id),
        window_start=began,
        threshold=str(failures),
        value=f"{count} failures",
        summary=(
            f"Scrape target {target.url} ({target.kind_label}, pool {target.pool}) failed its "
            f"last {count} scrapes (failing since about {began:%d %b %H:%M:%S} UTC): "
            f"{target.last_error}"
        ),
        figures={
            "url": target.url,
            "kind": target.kind,
            "pool": target.pool,
            "consecutive_failures": count,
            "last_scraped_at": rfc3339(target.last_scraped_at),
            "last_error": target.last_error[:500],
        },
        link=reverse("metering") + "#scrape-targets",
    )


# ---------------------------------------------------------------- what a rule's scope may name


def deployment_options() -> list[tuple[object, str]]:
    return [
        (slug, slug) for slug in Deployment.objects.order_by("slug").values_list("slug", flat=True)
    ]


def source_options() -> list[tuple[object, str]]:
    names = SourceSeen.objects.order_by("source").values_list("source", flat=True).distinct()
    return [(name, name) for name in names]


def scrape_target_options() -> list[tuple[object, str]]:
    return [
        (pk, f"#{pk} {url}")
        for pk, url in ScrapeTarget.objects.order_by("pk").values_list("pk", "url")
    ]
