"""The Grafana dashboards the portal ships (architecture.md "Metrics and dashboards"): the
factory's TEF and capacity, tenants and SLA, money; each panel a PromQL query over the
counters and gauges of /metrics (flywheel.domain.grafana writes them as Grafana's JSON).

Figures over the dashboard's time range take the counters' `increase(…[$__range])`; time
series take rates over `$__rate_interval`, at least an hour wide, since the counters advance
as hours close (a shorter window would show each hour's growth as a spike). Ratios of
increases are KPIs over whole hours: TEF = increase(standard) / increase(calendar). Pure: no
Django.
"""

from __future__ import annotations

from flywheel.domain.grafana import (
    COUNT,
    GPUS,
    INSTANT,
    RATIO,
    REQUESTS_PER_SECOND,
    TOKENS_PER_SECOND,
    Dashboard,
    Panel,
    Variable,
    money_unit,
)

# --- PromQL over the counters ---


def total(metric: str, *, where: str = "", by: str = "") -> str:
    """The counter's growth over the dashboard's range (summed, optionally by labels)."""
    return f"sum{_by(by)}(increase(tokenfactory_{metric}_total{{{where}}}[$__range]))"


def rate(metric: str, *, where: str = "", by: str = "") -> str:
    """The counter's growth per second over `$__rate_interval` (summed)."""
    return f"sum{_by(by)}(rate(tokenfactory_{metric}_total{{{where}}}[$__rate_interval]))"


def share(numerator: str, denominator: str) -> str:
    """numerator / denominator where the denominator grew (no 0/0)."""
    return f"{numerator} / ({denominator} > 0)"


def _by(labels: str) -> str:
    return f" by ({labels}) " if labels else ""


POOL = 'pool=~"$pool"'
TENANT = 'tenant=~"$tenant"'
OUTPUT = 'class=~"output|reasoning"'


def _ratio_over(numerator: str, denominator: str, where: str = POOL, by: str = "") -> str:
    return share(total(numerator, where=where, by=by), total(denominator, where=where, by=by))


def _hourly(numerator: str, denominator: str, by: str = "pool") -> str:
    return share(rate(numerator, where=POOL, by=by), rate(denominator, where=POOL, by=by))


# --- panels: a figure over the range, figures over time, one bar per label ---

Target = tuple[str, str]  # PromQL, legend


def stat(title: str, description: str, unit: str, *targets: Target, width: int = 6) -> Panel:
    return Panel(title, description, unit, targets, width=width)


def timeseries(title: str, description: str, unit: str, *targets: Target) -> Panel:
    return Panel(title, description, unit, targets, kind="timeseries", width=12, height=8)


def bars(title: str, description: str, unit: str, *targets: Target, height: int = 8) -> Panel:
    return Panel(title, description, unit, targets, kind="bargauge", width=12, height=height)


def _factory() -> Dashboard:
    factors = (
        ("TEF", "Token Efficiency Factor over the range: standard GPU-seconds produced / "
         "calendar GPU-seconds (kpis.md section 2). Typical 20-35%, good from 40%, target 65%.",
         "standard", "calendar"),
        ("α availability", "Healthy / installed GPU-seconds over the range.", "available",
         "calendar"),
        ("β occupancy", "Busy / healthy GPU-seconds over the range: the share of healthy time "
         "in production.", "busy", "available"),
        ("η efficiency", "Standard / busy GPU-seconds over the range: tokens made per busy "
         "GPU-second relative to R_ref (may exceed 100%: R_ref stale).", "standard", "busy"),
    )  # fmt: skip
    gpus = (("calendar", "installed"), ("available", "healthy"), ("busy", "busy"),
            ("standard", "at R_ref (std)"))  # fmt: skip
    return Dashboard(
        uid="tokenfactory-factory",
        file="factory.json",
        title="Token factory: TEF and capacity",
        description="TEF and its factors, capacity and production per pool, from the "
        "portal's counters (/metrics). Engine health stays on the engines' own dashboards.",
        variables=(Variable("pool", "Pool", "tokenfactory_calendar_gpu_seconds_total"),),
        panels=(
            *(
                stat(title, text, RATIO,
                     (_ratio_over(f"{num}_gpu_seconds", f"{den}_gpu_seconds"), title), width=5)
                for title, text, num, den in factors
            ),
            stat("Counted up to",
                 "The end of the last whole hour the counters count: they advance as hours "
                 "close and the portal measures them, so the last hour shows once it is over.",
                 INSTANT, ("tokenfactory_counted_until_timestamp_seconds * 1000", "counted up to"),
                 width=4),
            timeseries("TEF by pool", "Standard / calendar GPU-seconds per pool, hour by hour.",
                       RATIO,
                       (_hourly("standard_gpu_seconds", "calendar_gpu_seconds"), "{{pool}}")),
            timeseries("GPUs installed, healthy and busy",
                       "Calendar, available and busy GPU-seconds per second: the GPUs of each "
                       "state on average over each window.", GPUS,
                       *((rate(f"{name}_gpu_seconds", where=POOL), legend)
                         for name, legend in gpus)),
            timeseries("Output tokens per second by model",
                       "Output tokens (reasoning included) of every request, failed ones too.",
                       TOKENS_PER_SECOND,
                       (rate("tokens", where=f"{POOL},{OUTPUT}", by="model"), "{{model}}")),
            timeseries("Requests per second by outcome",
                       "Requests per second, ok and error, of every pool selected.",
                       REQUESTS_PER_SECOND,
                       (rate("requests", where=POOL, by="status"), "{{status}}")),
            bars("Reserved share of healthy GPU-seconds",
                 "GPU-seconds reserved for tenants / available GPU-seconds per pool over the "
                 "range (kpis.md 3d, reserved_share).", RATIO,
                 (_ratio_over("reserved_gpu_seconds", "available_gpu_seconds", by="pool"),
                  "{{pool}}"), height=5),
            stat("TEF this month (as the portal reports it)",
                 "The portal's month-to-date gauges, the figure GET /api/v1/kpis returns.", RATIO,
                 ('tokenfactory_tef{scope="factory"}', "TEF"),
                 ('tokenfactory_tfi{scope="factory"}', "TFI"), width=12),
        ),
    )  # fmt: skip


def _tenants() -> Dashboard:
    by_tenant = {"where": TENANT, "by": "tenant"}
    attainment = share(total("tenant_compliant_requests", **by_tenant),
                       total("tenant_requests", **by_tenant))  # fmt: skip
    return Dashboard(
        uid="tokenfactory-tenants",
        file="tenants.json",
        title="Token factory: tenants and SLA",
        description="Per-tenant SLO attainment, usage and the factory's SLA delivery, from the "
        "portal's counters (per-tenant series unless METRICS_TENANT_LABELS=0).",
        variables=(
            Variable("tenant", "Tenant", "tokenfactory_tenant_requests_total"),
            Variable("pool", "Pool", "tokenfactory_calendar_gpu_seconds_total"),
        ),
        panels=(
            stat("SLO attainment", "Compliant / all requests of the tenants selected over the "
                 "range (errors miss, kpis.md 3b).", RATIO,
                 (_ratio_over("tenant_compliant_requests", "tenant_requests", where=TENANT),
                  "attainment")),
            stat("σ SLA delivery", "Compliant / all standard GPU-seconds over the range: the "
                 "share of production delivered within SLO (kpis.md section 3).", RATIO,
                 (_ratio_over("compliant_standard_gpu_seconds", "standard_gpu_seconds"), "σ")),
            stat("Tenants served", "Tenants with at least one request over the range.", COUNT,
                 (f"count({total('tenant_requests', **by_tenant)} > 0)", "tenants")),
            stat("Error share", "Failed / all requests over the range.", RATIO,
                 (share(total("requests", where=f'{POOL},status="error"'),
                        total("requests", where=POOL)), "errors")),
            bars("Lowest SLO attainment by tenant",
                 "The ten tenants with the lowest share of compliant requests over the range.",
                 RATIO, (f"bottomk(10, {attainment})", "{{tenant}}"), height=9),
            bars("Most tokens by tenant",
                 "The ten tenants with the most tokens (input and output) over the range.", COUNT,
                 (f"topk(10, {total('tenant_tokens', **by_tenant)})", "{{tenant}}"), height=9),
            timeseries("Requests per second by tenant",
                       "The ten busiest tenants' requests per second.", REQUESTS_PER_SECOND,
                       (f"topk(10, {rate('tenant_requests', **by_tenant)})", "{{tenant}}")),
            timeseries("σ SLA delivery by pool",
                       "Compliant / all standard GPU-seconds per pool, hour by hour.", RATIO,
                       (_hourly("compliant_standard_gpu_seconds", "standard_gpu_seconds"),
                        "{{pool}}")),
        ),
    )  # fmt: skip


def _finance(currency: str) -> Dashboard:
    money = f'{POOL},currency="{currency}"'
    unit = money_unit(currency)
    rho = share(total("realized_revenue", where=money), total("list_value", where=money))
    tfi = (
        f"({_ratio_over('paid_compliant_standard_gpu_seconds', 'calendar_gpu_seconds')}) * ({rho})"
    )
    per_million = (f"{total('realized_revenue', where=money)} / "
                   f"({total('tokens', where=f'{POOL},{OUTPUT}')} / 1e6 > 0)")  # fmt: skip
    return Dashboard(
        uid="tokenfactory-finance",
        file="finance.json",
        title="Token factory: money",
        description=f"Realized revenue, list value, price realization and TFI in {currency}, "
        "from the portal's counters (the unrounded rating; invoices round per line).",
        variables=(Variable("pool", "Pool", "tokenfactory_calendar_gpu_seconds_total"),),
        panels=(
            stat("Realized revenue", "Realized amounts of the paid tokens over the range: after "
                 "discounts, tiers and promotions, before rounding (kpis.md section 3).", unit,
                 (total("realized_revenue", where=money), "realized"), width=5),
            stat("List value", "List value of the paid tokens over the range.", unit,
                 (total("list_value", where=money), "list value"), width=5),
            stat("ρ price realization", "Realized revenue / list value over the range.", RATIO,
                 (rho, "ρ"), width=5),
            stat("s sell-through", "Paid / all SLA-compliant standard GPU-seconds over the range.",
                 RATIO, (_ratio_over("paid_compliant_standard_gpu_seconds",
                                     "compliant_standard_gpu_seconds"), "s"), width=4),
            stat("TFI", "Token Factory Index over the range: TEF × σ × s × ρ = paid compliant "
                 "standard / calendar GPU-seconds × ρ (kpis.md section 3). 35-45% is excellent.",
                 RATIO, (tfi, "TFI"), width=5),
            timeseries("Realized revenue per hour by pool", "Realized revenue per hour of each "
                       "pool.", unit,
                       (f"{rate('realized_revenue', where=money, by='pool')} * 3600", "{{pool}}")),
            bars("Realized revenue by pool", "Realized revenue of each pool over the range.", unit,
                 (total("realized_revenue", where=money, by="pool"), "{{pool}}")),
            stat("Realized revenue per million output tokens served",
                 "Realized revenue / million output tokens of every request over the range "
                 "(paid or not: kpis.md's revenue per million paid tokens is on the portal).",
                 unit, (per_million, "per million"), width=12),
        ),
    )  # fmt: skip


def dashboards(*, currency: str) -> list[Dashboard]:
    """The dashboards the portal ships, money in `currency` (the factory's)."""
    return [_factory(), _tenants(), _finance(currency)]
