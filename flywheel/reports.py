"""TFOM reports: the P&L, unit economics, KPIs and the technical → financial mapping of a
period, with plain-language explanations and benchmark bands, exported as CSV, XLSX and PDF.

One builder (`tfom_report_build`) feeds the investor page, the report page and every
export, so a figure reads the same everywhere. Money stays unrounded until it is shown or
exported (cents, half-up).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, localcontext

from django.conf import settings
from django.template.loader import render_to_string
from django.utils import timezone

from metering.models import HourlyUsage

from .bands import Band, band_of
from .kpis import KPI_CONTEXT
from .measurement import FACTORY, FactoryData
from .services.costs import factory_costs_in_force
from .services.tfom import tfom_measure
from .tfom import DEFAULT_BASELINE_TEF, SECONDS_PER_MONTH, Tfom

ZERO = Decimal(0)
CENT = Decimal("0.01")
RATIO_PLACES = Decimal("1e-10")
HOUR = 3600

# Plain-language meaning of each figure, for readers who never saw a GPU.
EXPLAIN = {
    "gpu": "A GPU is the specialised chip that runs AI models. The factory owns thousands of "
    "them; every figure below is about turning their time into text customers pay for.",
    "token": "A token is a piece of a word (about ¾ of an English word). Customers buy the "
    "tokens the models write for them, priced per million.",
    "realized_revenue": "What customers owe for the tokens they bought, after their negotiated "
    "discounts, volume tiers and promotional credits.",
    "minimum_shortfall": "Customers who committed to a minimum monthly spend and used less "
    "still pay the difference.",
    "sla_credits": "Money given back to customers when the service was down or too slow "
    "for longer than their contract allows.",
    "revenue": "Everything the factory earned in the period.",
    "depreciation": "The purchase price of the GPUs and servers, spread evenly over their "
    "useful life (straight line), for the part of it that falls in the period.",
    "energy_cost": "Electricity for the GPUs, plus cooling and the rest of the building "
    "(the PUE factor), at the contracted price per kWh.",
    "hosting": "Rent for the data-centre space, power connection, network and storage.",
    "cogs": "Cost of goods sold: what it costs to run the machines that make the tokens.",
    "gross_profit": "Revenue minus the cost of running the machines.",
    "gross_margin": "The share of each dollar of revenue left after running the machines.",
    "staff": "Salaries of the people who run the factory.",
    "sga": "Sales, general and administrative costs: selling, offices, finance, legal.",
    "opex": "Operating expenses: staff plus sales, general and administrative costs.",
    "ebitda": "Earnings before interest, taxes, depreciation and amortisation: the cash the "
    "factory's operations generate, before paying back the machines.",
    "ebit": "Operating profit: EBITDA minus the machines' depreciation.",
    "total_cost": "Every cost of the period: running the machines plus operating expenses.",
    "cost_per_million_tokens": "What it cost, all in, to make one million output tokens.",
    "cost_per_million_paid_tokens": "All costs divided over the tokens customers paid for.",
    "revenue_per_million_tokens": "What the factory earned for each million tokens it sold.",
    "daily_token_value_per_gpu": "Revenue one GPU earned per day, on average.",
    "tokens_per_kwh": "Output tokens made with one kilowatt-hour of electricity.",
    "energy_kwh": "Electricity used, building overhead included.",
    "output_tokens": "Every token the models wrote, sold or not.",
    "paid_output_tokens": "Tokens customers paid for.",
    "installed_gpus": "GPUs installed, averaged over the period.",
    "cost_per_gpu_hour": "All-in cost of one GPU for one hour; GPU clouds rented an H100 for "
    "about 1.70–2.35 per hour on one-year contracts in 2025–26.",
    "capex_invested": "What the installed GPUs and their servers cost to buy.",
    "roi": "Return on investment: a year of operating profit at this period's pace, as a "
    "share of what the machines cost.",
    "payback_years": "Years of cash from operations (EBITDA at this period's pace) needed to "
    "pay back what the machines cost.",
    "asset_turnover": "A year of revenue at this period's pace, per dollar of machines.",
    "equivalent_gpus": "How many GPUs a typical data centre (working at the baseline TEF) "
    "would need to make what this factory made.",
    "avoided_capex": "What buying those extra GPUs would have cost: the value of running the "
    "factory better than a typical one.",
    "availability": "Share of the time the GPUs were healthy (not broken or in maintenance).",
    "occupancy": "Share of the healthy time the GPUs were put to work on customer requests.",
    "efficiency": "How much the working GPUs produced compared with their rated speed.",
    "tef": "Token Efficiency Factor: the share of all GPU time that turned into tokens at the "
    "rated speed (availability × occupancy × efficiency).",
    "sla_delivery": "Share of the production delivered within the promised speed and "
    "reliability (the SLA).",
    "sell_through": "Share of the well-delivered production that a paying customer bought "
    "(the rest went to trials, internal use or free allowances).",
    "price_realization": "Share of the list price actually collected, after discounts.",
    "tfi": "Token Factory Index: the share of GPU time that became tokens delivered on "
    "time, sold, at full list price (TEF × SLA delivery × sell-through × price realization).",
    "tps": "Output tokens written per second, on average.",
    "theoretical_tps": "What every installed GPU would write per second at its rated speed.",
}

RENTAL_BAND = (Decimal("1.70"), Decimal("2.35"))  # H100 per GPU-hour, demo-factory.md


def _pct(value: Decimal) -> str:
    return f"{float(value) * 100:.1f}".rstrip("0").rstrip(".") + "%"


@dataclass(frozen=True)
class ReportPeriod:
    """A report's period: a UTC month (YYYY-MM) or quarter (YYYY-Qn), clipped to now."""

    key: str
    label: str
    start: datetime
    end: datetime
    is_to_date: bool = False


_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_QUARTER = re.compile(r"^(\d{4})-Q([1-4])$")


def _month(year: int, month: int) -> datetime:
    return datetime(year + (month - 1) // 12, (month - 1) % 12 + 1, 1, tzinfo=UTC)


def report_period_parse(value: str, *, now: datetime | None = None) -> ReportPeriod:
    """`YYYY-MM` or `YYYY-Qn`; a period still running ends at the current hour. ValueError
    when the text is neither or the period has not started."""
    now = now or timezone.now()
    if match := _MONTH.match(value or ""):
        year, month = int(match[1]), int(match[2])
        if not 1 <= month <= 12:
            raise ValueError("period: the month must be 01 to 12")
        start, end = _month(year, month), _month(year, month + 1)
        label = start.strftime("%B %Y")
    elif match := _QUARTER.match(value or ""):
        year, quarter = int(match[1]), int(match[2])
        start, end = _month(year, 3 * quarter - 2), _month(year, 3 * quarter + 1)
        label = f"Q{quarter} {year}"
    else:
        raise ValueError("period: use YYYY-MM (a month) or YYYY-Qn (a quarter)")
    if start >= now:
        raise ValueError("period: it has not started yet")
    current_hour = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    is_to_date = end > now
    if is_to_date:
        end = max(current_hour, start + timedelta(hours=1))
        label = f"{label} (to {end:%d %b %H:00} UTC)"
    return ReportPeriod(key=value, label=label, start=start, end=end, is_to_date=is_to_date)


def report_periods(*, now: datetime | None = None) -> list[ReportPeriod]:
    """Every month and quarter from the first metered usage to now, newest first."""
    now = now or timezone.now()
    first = HourlyUsage.objects.order_by("hour").values_list("hour", flat=True).first()
    if first is None:
        return []
    keys: list[str] = []
    month = _month(first.year, first.month)
    while month < now:
        quarter = f"{month.year}-Q{(month.month - 1) // 3 + 1}"
        keys += [f"{month:%Y-%m}"] + ([quarter] if quarter not in keys else [])
        month = _month(month.year, month.month + 1)
    periods = [report_period_parse(key, now=now) for key in keys]
    return sorted(periods, key=lambda p: (p.start, p.end), reverse=True)


@dataclass(frozen=True)
class Row:
    """One line of a report section: a figure (value and unit), optionally the money it
    maps to (`amount`), and what it means."""

    key: str
    label: str
    value: Decimal | int | None
    unit: str
    note: str = ""
    amount: Decimal | None = None
    band: Band | None = None
    is_total: bool = False

    @property
    def is_money(self) -> bool:
        """Money, or money per unit (USD/M tokens): shown with the money format."""
        return self.unit.split("/")[0] == settings.FACTORY_CURRENCY


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    intro: str
    rows: list[Row]
    has_amount: bool = False

    @property
    def has_band(self) -> bool:
        return any(row.band for row in self.rows)


@dataclass
class TfomReport:
    """Everything one TFOM report shows, for one period of the factory."""

    label: str
    start: datetime
    end: datetime
    tfom: Tfom
    pools: list[tuple[str, str, Tfom]]  # slug, name, figures
    shortfall: Decimal
    sla_credits: Decimal
    staff: Decimal
    sga: Decimal
    currency: str
    generated_at: datetime
    rating_errors: dict[str, str] = field(default_factory=dict)
    sections: list[Section] = field(default_factory=list)

    @property
    def installed_gpus(self) -> Decimal:
        with localcontext(KPI_CONTEXT):
            return self.tfom.calendar_gpu_seconds / _seconds(self.start, self.end)

    @property
    def cost_per_gpu_hour(self) -> Decimal | None:
        if not self.tfom.calendar_gpu_seconds:
            return None
        with localcontext(KPI_CONTEXT):
            return self.tfom.total_cost * HOUR / self.tfom.calendar_gpu_seconds


def _seconds(start: datetime, end: datetime) -> Decimal:
    return Decimal(int((end - start).total_seconds()))


def tfom_report_build(
    *,
    start: datetime,
    end: datetime,
    label: str,
    baseline_tef: Decimal = DEFAULT_BASELINE_TEF,
    data: FactoryData | None = None,
) -> TfomReport:
    """The factory's TFOM report over [start, end), with a breakdown per pool. Raises
    TfomError when a pool has no cost model in force at `start`."""
    data = data if data is not None else FactoryData(start=start, end=end)
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
        months = _seconds(start, end) / SECONDS_PER_MONTH
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
        generated_at=timezone.now(),
        rating_errors=dict(data.rating_errors),
    )
    report.sections = _sections(report)
    return report


def _row(key: str, label: str, value, unit: str, **extra) -> Row:
    return Row(key=key, label=label, value=value, unit=unit, note=EXPLAIN.get(key, ""), **extra)


def _sections(report: TfomReport) -> list[Section]:
    t, money = report.tfom, report.currency
    return [
        Section(
            "pnl",
            "P&L",
            "Where the money came from and where it went.",
            [
                _row("realized_revenue", "Realized revenue", t.realized_revenue, money),
                _row("minimum_shortfall", "Unused committed minimums", report.shortfall, money),
                _row("sla_credits", "SLA credits", ZERO - report.sla_credits, money),
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
        ),
        Section(
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
                _row("roi", "Return on investment (ROI, yearly)", t.roi, "ratio"),
                _row("payback_years", "Payback", t.payback_years, "years"),
                _row("asset_turnover", "Asset turnover (yearly)", t.asset_turnover, "ratio"),
                _row(
                    "equivalent_gpus",
                    f"Equivalent GPUs at a baseline TEF of {_pct(t.baseline_tef)}",
                    t.equivalent_gpus,
                    "GPUs",
                ),
                _row("avoided_capex", "Avoided capex", t.avoided_capex, money),
            ],
        ),
        Section(
            "kpis",
            "KPIs",
            "How well GPU time turned into sold tokens, beside the industry bands of kpis.md.",
            [
                _row(key, label, getattr(t, key), unit, band=band_of(key, getattr(t, key)))
                for key, label, unit in (
                    ("availability", "Availability α", "ratio"),
                    ("occupancy", "Occupancy β", "ratio"),
                    ("efficiency", "Efficiency η", "ratio"),
                    ("tef", "TEF", "ratio"),
                    ("sla_delivery", "SLA delivery σ", "ratio"),
                    ("sell_through", "Sell-through s", "ratio"),
                    ("price_realization", "Price realization ρ", "ratio"),
                    ("tfi", "TFI", "ratio"),
                    ("tps", "Output tokens per second", "tokens/s"),
                    ("theoretical_tps", "Theoretical tokens per second", "tokens/s"),
                )
            ],
        ),
        Section(
            "mapping",
            "Technical → financial mapping",
            "What each technical factor cost or earned in money. GPU time is valued at its "
            "depreciation and hosting; unsold production at the period's average list price.",
            _mapping_rows(report),
            has_amount=True,
        ),
        Section(
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
        ),
    ]


def _mapping_rows(report: TfomReport) -> list[Row]:
    """Each factor's technical quantity beside the money it maps to (kpis.md sections 2-5)."""
    t = report.tfom
    c, a, b, std = (
        t.calendar_gpu_seconds,
        t.available_gpu_seconds,
        t.busy_gpu_seconds,
        t.std_gpu_seconds,
    )
    with localcontext(KPI_CONTEXT):
        gpu_second_cost = (t.depreciation + t.hosting) / c if c else ZERO
        sigma, sell, rho = t.sla_delivery, t.sell_through, t.price_realization
        compliant = std * sigma if sigma is not None else ZERO
        sold = compliant * sell if sell is not None else ZERO
        list_per_sold = t.list_value / sold if sold else ZERO
        unsold_value = (compliant - sold) * list_per_sold
        return [
            Row(
                "unavailable",
                "GPU time broken or in maintenance (α)",
                (c - a) / HOUR,
                "GPU-h",
                "Paid for (depreciation, hosting) while it could not produce.",
                amount=(c - a) * gpu_second_cost,
            ),
            Row(
                "idle",
                "Healthy GPU time left idle (β)",
                (a - b) / HOUR,
                "GPU-h",
                "Paid for while no customer work was running on it.",
                amount=(a - b) * gpu_second_cost,
            ),
            Row(
                "below_rate",
                "Busy GPU time short of the rated speed (η)",
                (b - std) / HOUR,
                "GPU-h",
                "Working time that produced less than the GPUs' rated speed "
                "(negative: faster than rated).",
                amount=(b - std) * gpu_second_cost,
            ),
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


# --- exports -------------------------------------------------------------------------------

CSV_HEADER = ["section", "key", "item", "value", "unit", "amount", "currency", "note"]


def export_value(value, unit: str) -> Decimal | int | None:
    """A figure as exported: money in cents (half-up), tokens whole, others to 1e-10."""
    if value is None or isinstance(value, int):
        return value
    with localcontext(KPI_CONTEXT):
        if unit == "tokens":
            return int(value)
        if unit == settings.FACTORY_CURRENCY:
            return value.quantize(CENT, rounding=ROUND_HALF_UP)
        return value.quantize(RATIO_PLACES, rounding=ROUND_HALF_UP)


def _money(value: Decimal | None) -> Decimal | None:
    if value is None:
        return None
    with localcontext(KPI_CONTEXT):
        return value.quantize(CENT, rounding=ROUND_HALF_UP)


def report_csv_rows(report: TfomReport) -> list[list]:
    """One line per figure of every section, in the order shown."""
    return [
        [
            section.key,
            row.key,
            row.label,
            export_value(row.value, row.unit),
            row.unit,
            _money(row.amount),
            report.currency if row.amount is not None else "",
            row.note + (f" Band: {row.band.label}." if row.band else ""),
        ]
        for section in report.sections
        for row in section.rows
    ]


_FORMATS = {"ratio": "0.0%", "tokens": "#,##0", "GPU-h": "#,##0.0", "GPUs": "#,##0.00"}


def report_xlsx(report: TfomReport) -> bytes:
    """One sheet per section (numbers as numbers, formatted), plus a cover sheet."""
    from openpyxl import Workbook
    from openpyxl.styles import Font

    book = Workbook()
    cover = book.active
    cover.title = "Report"
    bold = Font(bold=True)
    cover.append([f"TFOM report · {report.label}"])
    cover["A1"].font = Font(bold=True, size=14)
    cover.append(["Period start (UTC)", report.start.replace(tzinfo=None)])
    cover.append(["Period end (UTC, excluded)", report.end.replace(tzinfo=None)])
    cover.append(["Currency", report.currency])
    cover.append(["Generated (UTC)", report.generated_at.astimezone(UTC).replace(tzinfo=None)])
    for cell in ("B2", "B3", "B5"):
        cover[cell].number_format = "yyyy-mm-dd hh:mm"
    for slug, message in report.rating_errors.items():
        cover.append(["Not rated", f"{slug}: {message}"])
    cover.column_dimensions["A"].width = 28
    cover.column_dimensions["B"].width = 22
    for section in report.sections:
        sheet = book.create_sheet(_sheet_title(section.title))
        header = ["Item", "Value", "Unit"]
        if section.has_amount:
            header.append(f"Amount ({report.currency})")
        header += ["Band", "Meaning"]
        sheet.append(header)
        for cell in sheet[1]:
            cell.font = bold
        for row in section.rows:
            values = [row.label, export_value(row.value, row.unit), row.unit]
            if section.has_amount:
                values.append(_money(row.amount))
            values += [row.band.label if row.band else "", row.note]
            sheet.append(values)
            line = sheet.max_row
            value_cell = sheet.cell(line, 2)
            value_cell.number_format = _FORMATS.get(
                row.unit, "#,##0.00" if row.unit == report.currency else "#,##0.00##"
            )
            if section.has_amount:
                sheet.cell(line, 4).number_format = "#,##0.00"
            if row.is_total:
                for cell in sheet[line][:3]:
                    cell.font = bold
        sheet.column_dimensions["A"].width = 46
        sheet.column_dimensions["B"].width = 20
        sheet.column_dimensions["C"].width = 11
        for column in ("D", "E", "F"):
            sheet.column_dimensions[column].width = 30
        sheet.freeze_panes = "A2"
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _sheet_title(title: str) -> str:
    """Excel sheet titles: at most 31 characters, none of []:*?/\\."""
    return re.sub(r"[\[\]:*?/\\]", "-", title.replace("→", "to"))[:31]


# --- PDF chart -----------------------------------------------------------------------------

CHART_WIDTH, CHART_LABEL_WIDTH, CHART_BAR_HEIGHT, CHART_GAP = 900, 120, 22, 8
CHART_COLOURS = {"revenue": "#1f6feb", "cost": "#d9480f", "profit": "#2b8a3e", "loss": "#b3261e"}


def pnl_chart(report: TfomReport) -> dict:
    """A horizontal bar chart of the P&L (revenue, costs, EBITDA, EBIT), as SVG geometry the
    PDF template draws: bars to the right of zero are positive, to the left negative."""
    t = report.tfom
    items = [
        ("Revenue", t.revenue, "revenue"),
        ("Depreciation", t.depreciation, "cost"),
        ("Energy", t.energy_cost, "cost"),
        ("Hosting", t.hosting, "cost"),
        ("Opex", t.opex, "cost"),
        ("EBITDA", t.ebitda, "profit" if t.ebitda >= 0 else "loss"),
        ("EBIT", t.ebit, "profit" if t.ebit >= 0 else "loss"),
    ]
    values = [float(value) for _, value, _ in items]
    low, high = min(0.0, *values), max(0.0, *values)
    span = (high - low) or 1.0
    plot = CHART_WIDTH - CHART_LABEL_WIDTH - 110  # room for the value text
    zero_x = CHART_LABEL_WIDTH + plot * (-low / span)
    bars = []
    for index, ((label, value, kind), number) in enumerate(zip(items, values, strict=True)):
        width = plot * abs(number) / span
        x = zero_x if number >= 0 else zero_x - width
        y = 10 + index * (CHART_BAR_HEIGHT + CHART_GAP)
        bars.append(
            {
                "label": label,
                "x": round(x, 1),
                "y": y,
                "width": round(max(width, 0.5), 1),
                "height": CHART_BAR_HEIGHT,
                "colour": CHART_COLOURS[kind],
                "text": f"{_money(value):,.0f}",
                "text_x": round((x + width if number >= 0 else x) + 6, 1),
                "text_y": y + CHART_BAR_HEIGHT / 2 + 4,
                "label_y": y + CHART_BAR_HEIGHT / 2 + 4,
            }
        )
    height = 20 + len(items) * (CHART_BAR_HEIGHT + CHART_GAP)
    return {
        "width": CHART_WIDTH,
        "height": height,
        "label_x": CHART_LABEL_WIDTH - 8,
        "zero_x": round(zero_x, 1),
        "bars": bars,
        "title": f"P&L, {report.label} ({report.currency})",
    }


def report_pdf(report: TfomReport, *, base_url: str) -> bytes:
    """The report as PDF, rendered by WeasyPrint from its HTML document."""
    from weasyprint import HTML

    html = render_to_string(
        "flywheel/tfom_report_document.html",
        {"report": report, "chart": pnl_chart(report), "issuer": settings.FACTORY_NAME},
    )
    return HTML(string=html, base_url=base_url).write_pdf()
