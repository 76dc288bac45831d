"""The CSV export: a header and one line per figure of every section."""

from __future__ import annotations

from flywheel.domain.reports.formats import export_value, report_money
from flywheel.domain.reports.model import TfomReport

CSV_HEADER = ["section", "key", "item", "value", "unit", "amount", "currency", "note"]


def report_csv_rows(report: TfomReport) -> list[list]:
    """One line per figure of every section, in the order shown."""
    return [
        [
            section.key,
            row.key,
            row.label,
            export_value(row.value, row.unit, currency=report.currency),
            row.unit,
            report_money(row.amount, currency=report.currency),
            report.currency if row.amount is not None else "",
            row.note + (f" Band: {row.band.label}." if row.band else ""),
        ]
        for section in report.sections
        for row in section.rows
    ]
