"""The XLSX export: a cover sheet and one formatted sheet per section."""

from __future__ import annotations

import io
import re
from datetime import UTC

from flywheel.domain.reports.formats import export_value, report_money
from flywheel.domain.reports.model import TfomReport

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
            values = [
                row.label,
                export_value(row.value, row.unit, currency=report.currency),
                row.unit,
            ]
            if section.has_amount:
                values.append(report_money(row.amount, currency=report.currency))
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
    _text_is_text(book)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _text_is_text(book) -> None:
    """A name that starts like a formula (a pool called "=HYPERLINK(…)") is written as the
    text it is, never as a live formula (openpyxl types any "=…" string as a formula)."""
    for sheet in book.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                if cell.data_type == "f":
                    cell.data_type = "s"


def _sheet_title(title: str) -> str:
    """Excel sheet titles: at most 31 characters, none of []:*?/\\."""
    return re.sub(r"[\[\]:*?/\\]", "-", title.replace("→", "to"))[:31]
