"""CSV exports: every download goes through here so no cell can start a spreadsheet formula."""

import csv
from collections.abc import Iterable, Sequence

from django.http import HttpResponse

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value) -> str:
    """The cell as text; a leading = + - @ (or tab/CR) is escaped with a quote (OWASP CSV
    injection), so '-12.50' becomes "'-12.50" and stays readable."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def export_query(request, *, format: str = "csv") -> str:
    """The query string of a page's download link: the same filter and period, every row
    (no page), in `format`."""
    query = request.GET.copy()
    query.pop("page", None)  # a download holds every row of the filter, not one page
    query["format"] = format
    return query.urlencode()


def csv_response(*, filename: str, header: Sequence[str], rows: Iterable[Sequence]) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow(header)
    for row in rows:
        writer.writerow([csv_cell(value) for value in row])
    return response
