"""A month's chargeback as the API and the page hand it out (kpis.md 3e): flat rows per
tenant and project of either basis, and those rows as CSV or XLSX. Pure."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

INVOICE, COST = "invoice", "cost"
KINDS = ("usage", "reservation", "minimum", "promotion", "sla_credit", "adjustment")
TOKENS = ("input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens",
          "reasoning_tokens")  # fmt: skip
COLUMNS = {
    INVOICE: ("month", "tenant", "project", "name", "cost_center", "status", "currency",
              *TOKENS, "list_value", *KINDS, "total"),
    COST: ("month", "tenant", "project", "name", "cost_center", "currency", "std_gpu_seconds",
           "cost"),
}  # fmt: skip


def invoice_rows(tenants, *, month: str) -> list[dict]:
    """One row per tenant and project of the invoice basis (billing's TenantChargeback)."""
    rows = []
    for charged in tenants:
        for project in charged.projects:
            rows.append(
                {
                    "month": month,
                    "tenant": charged.tenant.slug,
                    "project": project["project"],
                    "name": project["name"],
                    "cost_center": project["cost_center"],
                    "status": charged.status,
                    "currency": charged.currency,
                    **project["tokens"],
                    "list_value": project["list_value"],
                    **{kind: project["amounts"].get(kind, Decimal(0)) for kind in KINDS},
                    "total": project["total"],
                }
            )
    return rows


def cost_rows(cost, *, month: str) -> list[dict]:
    """One row per tenant and project of the cost basis (CostChargeback)."""
    return [{"month": month, "currency": cost.currency, **row} for row in cost.rows]


def _plain(value) -> str | int:
    if isinstance(value, Decimal):
        return format(value, "f")
    return value


def rows_csv(rows: list[dict], *, basis: str) -> str:
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(COLUMNS[basis])
    for row in rows:
        writer.writerow([_plain(row[column]) for column in COLUMNS[basis]])
    return text.getvalue()


def rows_xlsx(rows: list[dict], *, basis: str, title: str) -> bytes:
    """One sheet: a title line, the header in bold, numbers as numbers (money to the cent,
    tokens grouped)."""
    from openpyxl import Workbook
    from openpyxl.styles import Font

    book = Workbook()
    sheet = book.active
    sheet.title = f"Chargeback ({basis})"
    sheet.append([title])
    sheet["A1"].font = Font(bold=True, size=14)
    sheet.append(list(COLUMNS[basis]))
    for cell in sheet[2]:
        cell.font = Font(bold=True)
    for row in rows:
        sheet.append([_cell(row[column]) for column in COLUMNS[basis]])
        for index, column in enumerate(COLUMNS[basis], start=1):
            cell = sheet.cell(sheet.max_row, index)
            if column in TOKENS:
                cell.number_format = "#,##0"
            elif column == "std_gpu_seconds":
                cell.number_format = "#,##0.000"
            elif isinstance(row[column], Decimal):
                cell.number_format = "#,##0.00"
    for index, column in enumerate(COLUMNS[basis], start=1):
        sheet.column_dimensions[sheet.cell(2, index).column_letter].width = max(12, len(column) + 2)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def _cell(value):
    return float(value) if isinstance(value, Decimal) else value
