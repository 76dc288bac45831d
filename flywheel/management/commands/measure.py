from flywheel.services.kpis import snapshots_measure
from metering.selectors.usage import window_resolve
from portal.management.period import PeriodCommand, period_option
from portal.pipeline import MEASURE, stages_run


class Command(PeriodCommand):
    help = (
        "Measure KPI snapshots of every scope for each day and month of --period or [--from, "
        "--to) (default: this month so far), after running the stages before the measurement "
        "(the fold and the rating) in this process, so a script that ingests and then "
        "measures reads exact figures."
    )

    def handle(self, *args, **options):
        stages_run(before=MEASURE)
        window = period_option(options, resolve=window_resolve)
        period = (window or window_resolve({})).period
        rows = snapshots_measure(start=period.start, end=period.end)
        days = len({r.period_start for r in rows if r.period_kind == "day"})
        months = len({r.period_start for r in rows if r.period_kind == "month"})
        self.stdout.write(
            f"Measured {days} days and {months} months ({len(rows)} snapshots) from "
            f"{period.start:%Y-%m-%d} to {period.end:%Y-%m-%d}."
        )
        factory = [r for r in rows if r.scope == "factory" and r.period_kind == "month"]
        for row in factory:
            values = row.values
            end = "" if row.is_closed else f" (to {row.period_end:%Y-%m-%d %H:00} UTC)"
            self.stdout.write(
                f"  {row.period_start:%Y-%m}{end} factory: TEF {values['tef'] or 0:.1%}, "
                f"TFI {values['tfi'] or 0:.1%} ({row.telemetry})"
            )
