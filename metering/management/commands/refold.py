from django.core.management.base import CommandError

from metering.services.usage.changes import usage_refold
from portal.errors import FieldError
from portal.management.period import PeriodCommand, period_option
from portal.pipeline import stages_run


class Command(PeriodCommand):
    help = (
        "Fold the rollups of --period or [--from, --to) again from raw events (a repair: the "
        "fold only ever adds), then run every stage of the pipeline in this process. Refused "
        "for a month whose raw events are incomplete (loaded as rollups, or archived)."
    )

    def handle(self, *args, **options):
        window = period_option(options)
        if window is None:
            raise CommandError("give --period, or --from (and --to)")
        try:
            queued = usage_refold(start=window.start, end=window.end)
        except FieldError as error:
            raise CommandError(f"--{error.field}: {error.message}") from None
        stages_run()
        self.stdout.write(
            f"Folded {queued} deployments again from raw events over "
            f"{window.start:%Y-%m-%d %H:%M} – {window.end:%Y-%m-%d %H:%M} UTC."
        )
