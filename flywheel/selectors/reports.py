"""Building a TFOM report: measuring the period and laying its figures out in sections."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal, localcontext

from django.conf import settings

from flywheel.domain.kpis import KPI_CONTEXT, KPIS, band_of
from flywheel.domain.reports.explain import EXPLAIN
from flywheel.domain.reports.model import HOUR, Row, Section, TfomReport, period_whole_seconds
from flywheel.domain.tfom import DEFAULT_BASELINE_TEF, SECONDS_PER_MONTH, annualized_withheld
from flywheel.selectors.measurement import FACTORY, FactoryData, kpi_read
from flywheel.selectors.tfom import factory_costs_in_force, tfom_measure
from portal import clock
from portal.periods import Period

ZERO = Decimal(0)


def _pct(value: Decimal) -> str:
    return f"{float(value) * 100:.1f}".rstrip("0").rstrip(".") + "%"


def tfom_report_build(
    *,
    start: datetime,
    end: datetime,
    label: str,
    baseline_tef: Decimal = DEFAULT_BASELINE_TEF,
    data: FactoryData | None = None,
) -> TfomReport:
    """The factory's TFOM report over [start, end), with a breakdown per pool. Raises
    FieldError when a pool has no cost model in force at `start`."""
    data = data if data is not None else kpi_read(Period(start, end))
    tfom = tfom_measure(scope=FACTORY, start=start, end=end, baseline_tef=baseline_tef, data=data)
    pools = [
        (
            slug,
            data.pools[pool_id].name,
            tfom_measure(scope=slug, start=start, end=end, baseline_tef=baseline_tef, data=data),
        )
        for slug, pool_id in sorted(data.slugs.items())
    ]
    shortfall, credits = data.revenue_adjustments(start=start, end=end)
    recorded = factory_costs_in_force(at=start)
    with localcontext(KPI_CONTEXT):
        months = period_whole_seconds(start, end) / SECONDS_PER_MONTH
        staff = recorded.staff_per_month * months if recorded else ZERO
        sga = recorded.sga_per_month * months if recorded else ZERO
    report = TfomReport(
        label=label,
        start=start,
        end=end,
        tfom=tfom,
        pools=pools,
        shortfall=shortfall,
        sla_credits=credits,
        staff=staff,
        sga=sga,
        currency=settings.FACTORY_CURRENCY,
        generated_at=clock.now(),
        rating_errors=dict(data.rating_errors),
    )
    report.with_sections(_sections(report))
    return report


def _row(key: str, label: str, value, unit: str, **extra) -> Row:
    return Row(key=key, label=label, value=value, unit=unit, note=EXPLAIN.get(key, ""), **extra)


def _annualized(report: TfomReport, *rows: tuple) -> list[Row]:
    """The annualized rows, withheld (no value, the reason as their note) for a period
    under 7 days."""
    reason = annualized_withheld(start=report.start, end=report.end)
    if reason is None:
        return [_row(*row) for row in rows]
    return [
        Row(key=key, label=label, value=None, unit=unit, note=reason)
        for key, label, _value, unit in rows
    ]


def _sections(report: TfomReport) -> list[Section]:
    """The report's sections, in the order every format prints them."""
    return [
        _pnl(report),
        _tie_out(report),
        _unit_economics(report),
        _kpis_section(report),
        Section(
            "mapping",
            "Technical → financial mapping",
            "What each technical factor cost or earned in money. GPU time is valued at its "
            "depreciation and hosting; unsold production at the period's average list price.",
            _mapping_rows(report),
            has_amount=True,
        ),
        _pools(report),
    ]


def _pnl(report: TfomReport) -> Section:
    """The P&L: revenue, costs, margins."""
    t, money = report.tfom, report.currency
    return Section(
        "pnl",
        "P&L",
        "Where the money came from and where it went.",
        [
            _row("realized_revenue", "Realized revenue", t.realized_revenue, money),
            _row("minimum_shortfall", "Unused committed minimums", report.shortfall, money),
            _row("sla_credits", "SLA credits", ZERO - report.sla_credits, money),
            _row(
                "revenue_dated",
                "Credit notes and breakage (open months)",
                t.revenue_dated,
                money,
            ),
            _row("revenue_tie_out", "Ledger tie-out (closed months)", t.revenue_tie_out, money),
            _row("revenue", "Revenue", t.revenue, money, is_total=True),
            _row("depreciation", "Depreciation of GPUs and servers", t.depreciation, money),
            _row("energy_cost", "Energy", t.energy_cost, money),
            _row("hosting", "Hosting, network and storage", t.hosting, money),
            _row("cogs", "Cost of goods sold (COGS)", t.cogs, money, is_total=True),
            _row("gross_profit", "Gross profit", t.gross_profit, money, is_total=True),
            _row("gross_margin", "Gross margin", t.gross_margin, "ratio"),
            _row("staff", "Staff", report.staff, money),
            _row("sga", "Sales, general and administrative", report.sga, money),
            _row("opex", "Operating expenses (opex)", t.opex, money, is_total=True),
            _row("ebitda", "EBITDA", t.ebitda, money, is_total=True),
            _row("ebit", "EBIT (operating profit)", t.ebit, money, is_total=True),
            _row("total_cost", "Total cost (COGS + opex)", t.total_cost, money),
        ],
    )


def _tie_out(report: TfomReport) -> Section:
    """Revenue against the ledger's, for closed months."""
    t, money = report.tfom, report.currency
    return Section(
        "tie_out",
        "Tie-out to the ledger",
        "Closed months take their revenue from the ledger (invoices rounded to the cent, "
        "late-usage adjustments on the invoice that carries them, SLA credits of the month); "
        "the rest of the period, and each pool's share below, is the unrounded rating with "
        "the credit notes and breakage dated in it.",
        [
            _row("revenue", "Revenue (ledger for closed months)", t.revenue, money),
            _row("revenue_rated", "Revenue per rating, before rounding", t.revenue_rated, money),
            _row(
                "revenue_dated",
                "Credit notes and breakage dated outside the closed months",
                t.revenue_dated,
                money,
            ),
            _row("revenue_tie_out", "Difference", t.revenue_tie_out, money, is_total=True),
        ],
    )


def _unit_economics(report: TfomReport) -> Section:
    """The money per token, GPU and kWh; yearly figures withheld under 7 days."""
    t, money = report.tfom, report.currency
    return Section(
        "unit_economics",
        "Unit economics",
        "The same money per token, per GPU and per kWh; yearly figures at this period's pace.",
        [
            _row(
                "cost_per_million_tokens",
                "Cost per million output tokens",
                t.cost_per_million_tokens,
                f"{money}/M tokens",
            ),
            _row(
                "cost_per_million_paid_tokens",
                "Cost per million paid tokens",
                t.cost_per_million_paid_tokens,
                f"{money}/M tokens",
            ),
            _row(
                "revenue_per_million_tokens",
                "Revenue per million paid tokens",
                t.revenue_per_million_tokens,
                f"{money}/M tokens",
            ),
            _row(
                "daily_token_value_per_gpu",
                "Daily token value per GPU",
                t.daily_token_value_per_gpu,
                f"{money}/GPU-day",
            ),
            _row(
                "cost_per_gpu_hour",
                "Cost per GPU-hour",
                report.cost_per_gpu_hour,
                f"{money}/GPU-h",
            ),
            _row("tokens_per_kwh", "Output tokens per kWh", t.tokens_per_kwh, "tokens/kWh"),
            _row("energy_kwh", "Energy used", t.energy_kwh, "kWh"),
            _row("output_tokens", "Output tokens produced", t.output_tokens, "tokens"),
            _row("paid_output_tokens", "Output tokens sold", t.paid_output_tokens, "tokens"),
            _row("installed_gpus", "Installed GPUs", report.installed_gpus, "GPUs"),
            _row("capex_invested", "Capex invested", t.capex_invested, money),
            *_annualized(
                report,
                ("roi", "Return on investment (ROI, yearly)", t.roi, "ratio"),
                ("payback_years", "Payback", t.payback_years, "years"),
                ("asset_turnover", "Asset turnover (yearly)", t.asset_turnover, "ratio"),
            ),
            _row(
                "equivalent_gpus",
                f"Equivalent GPUs at a baseline TEF of {_pct(t.baseline_tef)}",
                t.equivalent_gpus,
                "GPUs",
            ),
            _row("avoided_capex", "Avoided capex", t.avoided_capex, money),
        ],
    )


def _kpis_section(report: TfomReport) -> Section:
    """The KPIs beside their bands."""
    t = report.tfom
    return Section(
        "kpis",
        "KPIs",
        "How well GPU time turned into sold tokens, beside the industry bands of kpis.md.",
        [
            _row(kpi.key, kpi.title, value, kpi.unit, band=band_of(kpi.key, value))
            for kpi in KPIS
            if kpi.title
            for value in [getattr(t, kpi.key)]
        ],
    )


def _pools(report: TfomReport) -> Section:
    """Each pool's share of the factory."""
    money = report.currency
    return Section(
        "pools",
        "By pool",
        "Each pool's share; opex, committed minimums and SLA credits are allocated so that "
        "the pools add up to the factory.",
        [
            row
            for slug, name, p in report.pools
            for row in (
                Row(f"{slug}.tef", f"{name} · TEF", p.tef, "ratio", band=band_of("tef", p.tef)),
                Row(f"{slug}.revenue", f"{name} · Revenue", p.revenue, money),
                Row(f"{slug}.cogs", f"{name} · COGS", p.cogs, money),
                Row(f"{slug}.ebitda", f"{name} · EBITDA", p.ebitda, money),
                Row(f"{slug}.gross_margin", f"{name} · Gross margin", p.gross_margin, "ratio"),
            )
        ],
    )


def _mapping_rows(report: TfomReport) -> list[Row]:
    """Each factor's technical quantity beside the money it maps to (kpis.md sections 2-5)."""
    t = report.tfom
    c, std = t.calendar_gpu_seconds, t.std_gpu_seconds
    with localcontext(KPI_CONTEXT):
        gpu_second_cost = (t.depreciation + t.hosting) / c if c else ZERO
        sigma, sell, rho = t.sla_delivery, t.sell_through, t.price_realization
        compliant = std * sigma if sigma is not None else ZERO
        sold = compliant * sell if sell is not None else ZERO
        list_per_sold = t.list_value / sold if sold else ZERO
        unsold_value = (compliant - sold) * list_per_sold
        return [
            *_paid_unproductive(t, gpu_second_cost),
            Row(
                "sla_misses",
                "Production outside the SLA (σ)",
                (std - compliant) / HOUR,
                "GPU-h",
                "Tokens delivered too slowly or failed; SLA credits are the money given back.",
                amount=ZERO - report.sla_credits,
            ),
            Row(
                "unsold",
                "Good production not sold (s)",
                (compliant - sold) / HOUR,
                "GPU-h",
                "Trials, internal use and free allowances, valued at the average list price "
                "of what was sold.",
                amount=unsold_value,
            ),
            Row(
                "discounts",
                "Discounts and promotions (ρ)",
                rho if rho is not None else None,
                "ratio",
                "Share of list price collected; the amount is what was given away.",
                amount=t.realized_revenue - t.list_value,
            ),
            Row(
                "energy",
                "Energy used",
                t.energy_kwh,
                "kWh",
                "Electricity with building overhead, at the contracted price.",
                amount=t.energy_cost,
            ),
            Row(
                "equivalent_gpus",
                "Equivalent GPUs at the baseline TEF",
                t.equivalent_gpus,
                "GPUs",
                f"GPUs a typical centre (TEF {_pct(t.baseline_tef)}) would need; the "
                "amount is the capex avoided.",
                amount=t.avoided_capex,
            ),
        ]


def _paid_unproductive(t, gpu_second_cost: Decimal) -> list[Row]:
    """GPU time paid for (depreciation, hosting) that produced nothing sold at rate: broken
    (α), idle (β), slower than rated (η)."""
    c, a, b, std = (
        t.calendar_gpu_seconds,
        t.available_gpu_seconds,
        t.busy_gpu_seconds,
        t.std_gpu_seconds,
    )
    return [
        Row(key, label, lost / HOUR, "GPU-h", note, amount=lost * gpu_second_cost)
        for key, label, lost, note in (
            (
                "unavailable",
                "GPU time broken or in maintenance (α)",
                c - a,
                "Paid for (depreciation, hosting) while it could not produce.",
            ),
            (
                "idle",
                "Healthy GPU time left idle (β)",
                a - b,
                "Paid for while no customer work was running on it.",
            ),
            (
                "below_rate",
                "Busy GPU time short of the rated speed (η)",
                b - std,
                "Working time that produced less than the GPUs' rated speed "
                "(negative: faster than rated).",
            ),
        )
    ]
