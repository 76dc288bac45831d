from django.core.management.base import BaseCommand

from flywheel.management.period import period_arguments, period_option
from flywheel.services.kpis import snapshots_measure
from metering.selectors.usage import window_resolve
from metering.services.usage.rollup import rollup_pending


class Command(BaseCommand):
    help = (
        "Measure KPI snapshots of every scope for each day and month of --period or [--from, "
        "--to) (default: this month so far), folding pending events first."
    )

    def add_arguments(self, parser):
        period_arguments(parser)

    def handle(self, *args, **options):
        period = period_option(options) or window_resolve({}).period
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
