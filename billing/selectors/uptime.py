"""The `uptime_below_tier` alert kind (kpis.md section 3c): a tenant's month-to-date uptime
(section 3b) below its contract's highest credit threshold, the tier it was sold. Read from
metering's SLA figures and the month's contracts, in a query count that does not grow with
tenants."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from billing.domain.credits import target_of
from billing.selectors.pricing import month_contracts
from metering.selectors.sla.months import uptime_month_list
from portal.alert_kinds import Evaluation, Finding
from portal.errors import FieldError
from portal.formatting import percent_text, rfc3339
from portal.models import AlertRule
from portal.periods import month_start


def uptime_params_check(params: dict) -> dict:
    """An uptime_below_tier rule takes no params: the contract names the tier."""
    if params:
        raise FieldError(f"params.{sorted(params)[0]}", "an uptime_below_tier rule takes none")
    return {}


def _percent(value: Decimal) -> str:
    """Uptime as compared with its tier (ui.md): three decimals, 99.851%."""
    return percent_text(value, 3)


def uptime_threshold_shown(threshold: str, figures: dict) -> str:
    """An uptime_below_tier alert's threshold, the tier (a ratio): "0.999" → "99.900%"."""
    return _percent(Decimal(threshold))


def uptime_evaluate(rules: list[AlertRule], now: datetime) -> Evaluation:
    """A finding per rule whose tenant's month-to-date uptime is below its tier, keyed by
    the month and the tier (once a month); tenants without a contract tier or without an
    uptime figure yet never fire."""
    month = month_start(now)
    tenants = {rule.tenant_id: rule.tenant for rule in rules}
    slas = {
        up.tenant.pk: up.figures
        for up in uptime_month_list(month_start=month, tenants=list(tenants.values()), now=now)
    }
    contracts = month_contracts(tenant_ids=list(tenants), month_start=month)
    findings = []
    for rule in rules:
        sla, contract = slas.get(rule.tenant_id), contracts.get(rule.tenant_id)
        target = target_of(tiers=contract.tiers) if contract and contract.tiers else None
        if sla is None or sla.uptime is None or target is None:
            continue
        uptime = Decimal(sla.uptime.numerator) / Decimal(sla.uptime.denominator)
        if uptime >= target:
            continue
        findings.append(
            Finding(
                rule=rule,
                window_start=month,
                threshold=str(target),
                value=_percent(uptime),
                summary=(
                    f"{rule.tenant.name}'s {month:%B %Y} uptime so far, {_percent(uptime)}, "
                    f"is below its {_percent(target)} tier"
                ),
                figures={
                    "uptime": str(uptime.quantize(Decimal("1e-10"))),
                    "target": str(target),
                    "downtime_seconds": str(sla.downtime_seconds),
                    "maintenance_seconds": str(sla.maintenance_seconds),
                    "period_end": rfc3339(sla.period_end),
                },
                link="/billing/sla/",
            )
        )
    return Evaluation(findings=findings)
