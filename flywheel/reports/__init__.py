"""TFOM reports: the P&L, unit economics, KPIs and the technical → financial mapping of a
period, with plain-language explanations and benchmark bands, exported as CSV, XLSX and PDF.

One builder (`tfom_report_build`) feeds the investor page, the report page and every
export, so a figure reads the same everywhere. Money stays unrounded until it is shown or
exported (cents, half-up).
"""

from flywheel.reports.build import ZERO, tfom_report_build
from flywheel.reports.csv_rows import CSV_HEADER, report_csv_rows
from flywheel.reports.explain import EXPLAIN, RENTAL_BAND
from flywheel.reports.formats import CENT, RATIO_PLACES, export_value
from flywheel.reports.model import HOUR, Row, Section, TfomReport
from flywheel.reports.pdf import (
    CHART_BAR_HEIGHT,
    CHART_COLOURS,
    CHART_GAP,
    CHART_LABEL_WIDTH,
    CHART_WIDTH,
    pnl_chart,
    report_pdf,
)
from flywheel.reports.periods import ReportPeriod, report_period_parse, report_periods
from flywheel.reports.xlsx import report_xlsx

__all__ = [
    "CENT",
    "CHART_BAR_HEIGHT",
    "CHART_COLOURS",
    "CHART_GAP",
    "CHART_LABEL_WIDTH",
    "CHART_WIDTH",
    "CSV_HEADER",
    "EXPLAIN",
    "HOUR",
    "RATIO_PLACES",
    "RENTAL_BAND",
    "ZERO",
    "ReportPeriod",
    "Row",
    "Section",
    "TfomReport",
    "export_value",
    "pnl_chart",
    "report_csv_rows",
    "report_pdf",
    "report_period_parse",
    "report_periods",
    "report_xlsx",
    "tfom_report_build",
]
