from django.core.management.base import BaseCommand, CommandError

from flywheel.domain.loop.factors import LABELS, SYMBOLS
from flywheel.services.loop.cycles import cycle_run
from metering.selectors.usage import window_resolve
from metering.services.usage.rollup import rollup_pending
from portal.errors import FieldError


class Command(BaseCommand):
    help = (
        "Run one flywheel cycle: measure [--from, --to) (default: the last 7 whole UTC days), "
        "rank the factors by the monthly EBITDA their targets are worth, measure the levers "
        "applied before the period and update their multipliers, check the goal and propose "
        "the cheapest lever set. Running it again for the same period rewrites that cycle."
    )

    def add_arguments(self, parser):
        parser.add_argument("--from", dest="from_", help="YYYY-MM-DD or RFC 3339")
        parser.add_argument("--to", help="YYYY-MM-DD or RFC 3339 (excluded)")

    def handle(self, *args, from_=None, to=None, **options):
        if bool(from_) != bool(to):
            raise CommandError("give both --from and --to, or neither")
        start = end = None
        if from_:
            try:
                period = window_resolve({"from": from_, "to": to}).period
            except FieldError as error:
                raise CommandError(str(error)) from None
            start, end = period.start, period.end
        rollup_pending()
        try:
            cycle = cycle_run(start=start, end=end)
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
