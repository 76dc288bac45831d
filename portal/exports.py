"""CSV exports: every download goes through here, so numbers stay numbers and no text cell
can start a spreadsheet formula."""

import csv
from collections.abc import Iterable, Sequence
from decimal import Decimal

from django.http import HttpResponse

from portal import clock

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value) -> str:
    """The cell as written: a number as a number (negatives included, so a spreadsheet reads
    -12.50 as minus twelve fifty); text with a leading = + - @ (or tab/CR) escaped with a
    quote (OWASP CSV injection), so the name "=HYPERLINK(…)" stays text."""
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return f"{value:f}"  # positional: 0E-10 reads as 0.0000000000
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    text = str(value)
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


def list_csv(*, name: str, header: Sequence[str], rows: Iterable[Sequence]) -> HttpResponse:
    """A list page's download: every row its filters select, in its order, named for the day
    it was taken (`<name>-as-of-YYYY-MM-DD.csv`)."""
    return csv_response(
        filename=f"{name}-as-of-{clock.now():%Y-%m-%d}.csv", header=header, rows=rows
    )
