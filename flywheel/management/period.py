"""The period a flywheel command is given: `--period` (a preset, YYYY-MM or YYYY-Qn) or
`--from`/`--to`, read by the resolver the pages and the API use (kpis.md section 0)."""

from django.core.management.base import CommandError

from metering.selectors.usage import window_resolve
from portal.errors import FieldError
from portal.periods import Period


def period_arguments(parser) -> None:
    parser.add_argument(
        "--period", help="this_month, last_month, last_7_days, …, YYYY-MM or YYYY-Qn"
    )
    parser.add_argument("--from", dest="from_", help="YYYY-MM-DD or RFC 3339")
    parser.add_argument("--to", help="YYYY-MM-DD or RFC 3339 (excluded)")


def period_option(options: dict) -> Period | None:
    """The window measured of the period the options name; None when they name none. One
    the resolver refuses is a CommandError naming the option."""
    params = {"period": options["period"], "from": options["from_"], "to": options["to"]}
    if not any(params.values()):
        return None
    try:
        return window_resolve({key: value for key, value in params.items() if value}).period
    except FieldError as error:
        raise CommandError(f"--{error.field}: {error.message}") from None
