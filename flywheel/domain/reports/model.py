"""The report's shape: rows, sections and the TFOM report of one period."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal, localcontext

from flywheel.domain.bands import Band
from flywheel.domain.kpis import KPI_CONTEXT
from flywheel.domain.tfom import Tfom

HOUR = 3600


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
    currency: str = ""  # the report's; set once the report is built (TfomReport.with_currency)

    @property
    def is_money(self) -> bool:
        """Money, or money per unit (USD/M tokens): shown with the money format."""
        return bool(self.currency) and self.unit.split("/")[0] == self.currency


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

    def with_sections(self, sections: list[Section]) -> None:
        """Attach the sections, each row knowing the report's currency."""
        self.sections = [
            replace(s, rows=[replace(r, currency=self.currency) for r in s.rows]) for s in sections
        ]

    @property
    def installed_gpus(self) -> Decimal:
        with localcontext(KPI_CONTEXT):
            return self.tfom.calendar_gpu_seconds / period_whole_seconds(self.start, self.end)

    @property
    def cost_per_gpu_hour(self) -> Decimal | None:
        if not self.tfom.calendar_gpu_seconds:
            return None
        with localcontext(KPI_CONTEXT):
            return self.tfom.total_cost * HOUR / self.tfom.calendar_gpu_seconds


def period_whole_seconds(start: datetime, end: datetime) -> Decimal:
    return Decimal(int((end - start).total_seconds()))
