from datetime import datetime

from django.core.management.base import BaseCommand, CommandError

from billing.services.close import CloseError, close_run
from portal import clock
from portal.errors import FieldError
from portal.periods import last_month, month_parse


def _month(value: str) -> datetime:
    """--month as the API takes a month (portal.periods.month_parse)."""
    try:
        return month_parse(value)
    except FieldError as error:
        raise CommandError(f"--month {error.message}, got {value!r}") from None


class Command(BaseCommand):
    help = (
        "Close a UTC month (default: last month), or resume its close: lock it, run the stages "
        "before billing's, rate, close its SLA, issue invoices and credit notes."
    )

    def add_arguments(self, parser):
        parser.add_argument("--month", type=_month, help="YYYY-MM (default: last month)")

    def handle(self, *args, month=None, **options):
        month = month or last_month(clock.now())
        try:
            run = close_run(month_start=month)
        except CloseError as error:
            raise CommandError(str(error)) from None
        steps = ", ".join(run.steps) if run.steps else "none left: already closed"
        self.stdout.write(
            f"{month:%Y-%m}: steps done now: {steps}. {len(run.issued)} invoices issued, "
            f"{len(run.existing)} already issued, {len(run.credit_notes)} credit notes, "
            f"{len(run.nothing_due)} tenants with nothing due."
        )
        for invoice in run.issued:
            self.stdout.write(
                f"  {invoice.number}  {invoice.tenant.slug:<16} {invoice.total:>14,.2f} "
                f"{invoice.currency}"
            )
        for note in run.credit_notes:
            self.stdout.write(
                f"  {note.number}  {note.tenant.slug:<16} {-note.total:>14,.2f} {note.currency}"
            )
        for slug, message in run.errors.items():
            self.stderr.write(f"  {slug}: not billed: {message}")
        if run.errors:
            raise CommandError(
                f"{len(run.errors)} tenants could not be rated (see above); the close stopped "
                "and resumes where it stopped when run again"
            )
