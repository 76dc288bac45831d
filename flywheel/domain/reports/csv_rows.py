"""The CSV export: a header and one line per figure of every section, each line carrying
the period it measures (a line read alone, or pasted beside another period's, still says
which)."""

from __future__ import annotations

from flywheel.domain.reports.formats import export_value, report_money
from flywheel.domain.reports.model import TfomReport
from portal.formatting import rfc3339

CSV_HEADER = [
    "period_start", "period_end", "section", "key", "item", "value", "unit", "amount",
    "currency", "note",
]  # fmt: skip


def report_csv_rows(report: TfomReport) -> list[list]:
    """One line per figure of every section, in the order shown; the period is [start,
    end), as RFC 3339 instants."""
    start, end = rfc3339(report.start), rfc3339(report.end)
    return [
        [
            start,
            end,
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
