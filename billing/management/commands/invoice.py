from datetime import UTC, datetime, timedelta

from django.core.management.base import BaseCommand, CommandError

from billing.services.invoices import InvoiceError, invoice_run
from portal import clock
from portal.periods import month_start
from portal.pipeline import MEASURE, stages_run


def _month(value: str) -> datetime:
    try:
        return datetime.strptime(value, "%Y-%m").replace(tzinfo=UTC)
    except ValueError:
        raise CommandError(f"--month must be YYYY-MM, got {value!r}") from None


class Command(BaseCommand):
    help = "Rate a UTC month, post it to the ledger and issue invoices (default: last month)."

    def add_arguments(self, parser):
        parser.add_argument("--month", type=_month, help="YYYY-MM (default: last month)")

    def handle(self, *args, month=None, **options):
        month = month or month_start(month_start(clock.now()) - timedelta(days=1))
        stages_run(before=MEASURE)  # the fold and the rating, in this process
        try:
            run = invoice_run(month_start=month)
        except InvoiceError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"{month:%Y-%m}: {len(run.issued)} invoices issued, {len(run.existing)} already issued, "
            f"{len(run.nothing_due)} tenants with nothing due."
        )
        for invoice in run.issued:
            self.stdout.write(
                f"  {invoice.number}  {invoice.tenant.slug:<16} {invoice.total:>14,.2f} "
                f"{invoice.currency}"
            )
        for slug, message in run.errors.items():
            self.stderr.write(f"  {slug}: not invoiced: {message}")
        if run.errors:
            raise CommandError(f"{len(run.errors)} tenants could not be rated (see above)")
