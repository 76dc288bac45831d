from django.core.management.base import BaseCommand, CommandError

from flywheel.services.kpis import snapshots_measure
from metering.selectors.usage import window_resolve
from metering.services.usage.rollup import rollup_pending
from portal.errors import FieldError


class Command(BaseCommand):
    help = (
        "Measure KPI snapshots of every scope for each day and month in [--from, --to) "
        "(dates or RFC 3339; default this month so far), folding pending events first."
    )

    def add_arguments(self, parser):
        parser.add_argument("--from", dest="from_", help="YYYY-MM-DD or RFC 3339")
        parser.add_argument("--to", help="YYYY-MM-DD or RFC 3339 (excluded)")

    def handle(self, *args, from_=None, to=None, **options):
        try:
            period = window_resolve({k: v for k, v in (("from", from_), ("to", to)) if v}).period
        except FieldError as error:
            raise CommandError(str(error)) from None
        folded = rollup_pending()
        rows = snapshots_measure(start=period.start, end=period.end)
        days = len({r.period_start for r in rows if r.period_kind == "day"})
        months = len({r.period_start for r in rows if r.period_kind == "month"})
        self.stdout.write(
            f"Folded {folded} pending rollup cells; measured {days} days and {months} months "
            f"({len(rows)} snapshots) from {period.start:%Y-%m-%d} to {period.end:%Y-%m-%d}."
        )
        factory = [r for r in rows if r.scope == "factory" and r.period_kind == "month"]
        for row in factory:
            values = row.values
            self.stdout.write(
                f"  {row.period_start:%Y-%m} factory: TEF {values['tef'] or 0:.1%}, "
                f"TFI {values['tfi'] or 0:.1%} ({row.telemetry})"
            )
