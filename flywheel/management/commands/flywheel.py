from django.core.management.base import CommandError

from flywheel.domain.loop.factors import LABELS, SYMBOLS
from flywheel.services.loop.cycles import cycle_run
from metering.selectors.usage import window_resolve
from portal.errors import FieldError
from portal.management.period import PeriodCommand, period_option
from portal.pipeline import stages_run


class Command(PeriodCommand):
    help = (
        "Run one flywheel cycle: measure --period or [--from, --to) (default: the last 7 "
        "whole UTC days), rank the factors by the monthly EBITDA their targets are worth, "
        "measure the levers applied before the period and update their multipliers, check "
        "the goal and propose the cheapest lever set. Running it again for the same period "
        "rewrites that cycle."
    )

    def handle(self, *args, **options):
        window = period_option(options, resolve=window_resolve)
        period = window.period if window else None
        stages_run()  # every stage in order, in this process: exact figures
        try:
            cycle = cycle_run(start=period and period.start, end=period and period.end)
        except FieldError as error:
            raise CommandError(error.message) from None
        self.stdout.write(
            f"Cycle {cycle.period_start:%Y-%m-%d %H:%M} – {cycle.period_end:%Y-%m-%d %H:%M} UTC"
        )
        if cycle.error:
            raise CommandError(f"not measured: {cycle.error}")
        for row in cycle.diagnosis:
            self.stdout.write(
                f"  {row['rank']}. {SYMBOLS[row['factor']]} {LABELS[row['factor']]}: "
                f"{row['value'] or 0:.1%} (target {row['target']:.1%}), "
                f"+{float(row['ebitda_gain_per_month']):,.0f} EBITDA per month"
            )
        self.stdout.write(f"  bottleneck: {cycle.bottleneck or 'none'}")
        goal = {None: "no goal set", True: "met", False: "not met"}[cycle.is_goal_met]
        self.stdout.write(f"  goal: {goal}")
        if cycle.proposal:
            self.stdout.write(f"  proposal: {cycle.proposal['message']}")
        measured = cycle.evaluations.count()
        if measured:
            self.stdout.write(f"  lever applications measured: {measured}")
