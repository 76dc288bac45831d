from django.core.management.base import BaseCommand

from flywheel.domain.plan.explain import METHODS
from flywheel.selectors.plan import accuracy_of
from flywheel.services.plan import capacity_plan_update, forecasts_update
from portal.pipeline import stages_run


class Command(BaseCommand):
    help = (
        "Forecast every daily series (the factory, each pool and each model; production and "
        "revenue) 90 days ahead with its backtest, as the daily forecast job does, after "
        "running every stage of the pipeline in this process (kpis.md 6b); then the capacity "
        "plan from them (kpis.md 6c)."
    )

    def handle(self, *args, **options):
        stages_run()  # every stage in order, in this process: the last closed day is exact
        rows = forecasts_update()
        if not rows:
            self.stdout.write("No series: nothing was produced before today.")
            return
        self.stdout.write(f"{len(rows)} series, forecast from {rows[0].forecast_start} (UTC)")
        for row in rows:
            line = f"  {row.scope} {row.metric}: {METHODS[row.method]}"
            if row.note:
                line += f" ({row.note})"
            self.stdout.write(f"{line}; {accuracy_of(row)}")
        plan = capacity_plan_update()
        self.stdout.write(f"Capacity plan: {len(plan.body['months'])} months")
