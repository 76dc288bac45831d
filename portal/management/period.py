"""The period a command is given: `--period` (a preset, YYYY-MM or YYYY-Qn) or `--from`/`--to`,
read by the resolver the pages and the API use (kpis.md section 0)."""

from collections.abc import Callable

from django.core.management.base import BaseCommand, CommandError

from portal.errors import FieldError
from portal.periods import Window, period_resolve


def period_arguments(parser) -> None:
    parser.add_argument(
        "--period", help="this_month, last_month, last_7_days, …, YYYY-MM or YYYY-Qn"
    )
    parser.add_argument("--from", dest="from_", help="YYYY-MM-DD or RFC 3339")
    parser.add_argument("--to", help="YYYY-MM-DD or RFC 3339 (excluded)")


def period_option(
    options: dict, *, resolve: Callable[[dict], Window] = period_resolve
) -> Window | None:
    """The window of the period the options name (`resolve`: the period resolver, or the
    one told how far usage is metered); None when they name none. One the resolver refuses
    is a CommandError naming the option."""
    params = {"period": options["period"], "from": options["from_"], "to": options["to"]}
    if not any(params.values()):
        return None
    try:
        return resolve({key: value for key, value in params.items() if value})
    except FieldError as error:
        raise CommandError(f"--{error.field}: {error.message}") from None


class PeriodCommand(BaseCommand):
    """A command over a period: takes `--period` or `--from`/`--to` (`period_arguments`);
    `handle` reads them with `period_option`."""

    def add_arguments(self, parser):
        period_arguments(parser)
