"""Document numbers: `<series>-YYYY-NNNNNN` by the UTC year of issue, gapless per series
(invoices `INV`, credit notes `CN`; kpis.md "Invoices")."""

from datetime import datetime

from billing.models import DocumentCounter


def document_number(*, series: str, issued_at: datetime) -> str:
    """Lock the series' counter row for the year and take the next number, inside the issuing
    transaction: gapless, because a rollback of that transaction rolls the counter back."""
    year = issued_at.year
    DocumentCounter.objects.bulk_create(
        [DocumentCounter(series=series, year=year)], ignore_conflicts=True
    )
    counter = DocumentCounter.objects.select_for_update().get(series=series, year=year)
    counter.last += 1
    counter.save(update_fields=["last"])
    return f"{series}-{year}-{counter.last:06d}"
