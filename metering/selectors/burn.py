"""The `slo_burn` alert kind (kpis.md section 3c) evaluated from the 5-minute buckets.

Windows end at the last complete bucket: the start of the bucket holding how far usage is
metered (a fold that lags reads as a lag, not as a healthy hour). Every enabled rule is
evaluated from three queries, however many rules, tenants and deployments: the buckets of
the longest window summed per tenant, deployment and window; the deployment versions; the
contracts' targets (through the kernel, which billing provides)."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db.models import Q, Sum

from metering.domain.burn import (
    BUCKET,
    DEFAULT_TARGET,
    LONGEST,
    WINDOWS,
    Burning,
    Counts,
    burning_pairs,
    span_words,
)
from metering.models import Deployment, FiveMinuteUsage
from metering.selectors.factory import DeploymentVersions
from metering.selectors.usage import usage_metered_until
from portal.alert_kinds import Evaluation, Finding, tenant_slo_targets
from portal.formatting import decimal_plain, rfc3339
from portal.models import AlertRule

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def burn_window_end(*, now: datetime) -> datetime:
    """The end of the last complete 5-minute bucket usage is metered through."""
    until = usage_metered_until(now=now)
    return until - (until - EPOCH) % BUCKET


def _sums(end: datetime) -> dict[tuple[int, int], dict[timedelta, Counts]]:
    """{(tenant id, deployment id): {window: counts}} over the windows ending at `end`."""
    sums = {}
    for window in WINDOWS:
        within = Q(bucket__gte=end - window)
        sums[f"n{int(window.total_seconds())}"] = Sum("requests", filter=within)
        sums[f"ok{int(window.total_seconds())}"] = Sum("compliant_requests", filter=within)
    rows = (
        FiveMinuteUsage.objects.filter(bucket__gte=end - LONGEST, bucket__lt=end)
        .values("tenant_id", "deployment_id")
        .annotate(**sums)
    )
    return {
        (row["tenant_id"], row["deployment_id"]): {
            window: Counts(
                row[f"n{int(window.total_seconds())}"] or 0,
                row[f"ok{int(window.total_seconds())}"] or 0,
            )
            for window in WINDOWS
        }
        for row in rows
    }


def slo_burn_evaluate(rules: list[AlertRule], now: datetime) -> Evaluation:
    """Each rule's deployments (its scope's, or every one with traffic) whose window pairs
    burn: one finding per deployment and pair, at the pair's level."""
    end = burn_window_end(now=now)
    cells = _sums(end)
    slugs = dict(Deployment.objects.values_list("pk", "slug"))
    ids = {slug: pk for pk, slug in slugs.items()}
    versions = DeploymentVersions()
    contract = tenant_slo_targets(sorted({r.tenant_id for r in rules if r.tenant_id}), end)
    by_tenant: dict[int, dict[int, dict[timedelta, Counts]]] = defaultdict(dict)
    factory: dict[int, dict[timedelta, Counts]] = defaultdict(
        lambda: dict.fromkeys(WINDOWS, Counts())
    )
    for (tenant_id, deployment_id), counts in cells.items():
        by_tenant[tenant_id][deployment_id] = counts
        summed = factory[deployment_id]
        for window in WINDOWS:
            summed[window] += counts[window]
    factory = dict(factory)  # every deployment with traffic
    findings = []
    for rule in rules:
        windows = factory if rule.tenant_id is None else by_tenant.get(rule.tenant_id, {})
        if "deployment" in rule.scope:
            wanted = ids.get(rule.scope["deployment"])
            windows = {wanted: windows[wanted]} if wanted in windows else {}
        for deployment_id, counts in sorted(windows.items()):
            target = _target(rule, contract, versions.at(deployment_id, end - BUCKET))
            for burning in burning_pairs(
                counts, target=target, min_requests=rule.params.get("min_requests", 100)
            ):
                findings.append(_finding(rule, slugs[deployment_id], burning, target, end))
    return Evaluation(findings=findings)


def _target(rule: AlertRule, contract: dict[int, Decimal], version) -> Decimal:
    """The rule's target, else its tenant's contract's, else the deployment version's."""
    if "target" in rule.params:
        return Decimal(rule.params["target"])
    if rule.tenant_id in contract:
        return contract[rule.tenant_id]
    return version.slo_target if version is not None else DEFAULT_TARGET


def _finding(
    rule: AlertRule, deployment: str, burning: Burning, target: Decimal, end: datetime
) -> Finding:
    pair = burning.pair
    who = f"{rule.tenant.name} on {deployment}" if rule.tenant else deployment
    long_burn, short_burn = (f"{value:.1f}" for value in (burning.long_burn, burning.short_burn))
    return Finding(
        rule=rule,
        scope_key=deployment,
        window_start=end - pair.short,  # the condition holds at least this long
        threshold=pair.name,
        level=pair.level,
        value=long_burn,
        summary=(
            f"{who} burns its error budget at {long_burn}× the budget rate over "
            f"{span_words(pair.long)} and {short_burn}× over {span_words(pair.short)} "
            f"(fires above {pair.factor}×; target {decimal_plain(target * 100)}%)"
        ),
        figures={
            "deployment": deployment,
            "target": decimal_plain(target),
            "factor": str(pair.factor),
            "window_end": rfc3339(end),
            "long": _figures(burning.long, burning.long_burn),
            "short": _figures(burning.short, burning.short_burn),
        },
        link="/usage/",
    )


def _figures(counts: Counts, burn: Decimal) -> dict:
    return {
        "requests": counts.requests,
        "compliant": counts.compliant,
        "burn": str(round(burn, 4)),
    }


def bucket_tokens(*, end: datetime, tenant_ids: list[int]) -> dict[tuple[int, int], tuple]:
    """{(tenant id, deployment id): (input, cached, output tokens)} of the ok requests in the
    5-minute bucket that ends at `end` (a reservation's current rate, kpis.md 3d)."""
    rows = FiveMinuteUsage.objects.filter(
        bucket=end - BUCKET, tenant_id__in=tenant_ids
    ).values_list("tenant_id", "deployment_id", "ok_input_tokens", "ok_cached_tokens",
                  "ok_output_tokens")  # fmt: skip
    return {(t, d): (i, c, o) for t, d, i, c, o in rows}
