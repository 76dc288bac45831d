"""Metering's change log, for the stages that read it (portal.pipeline)."""

from metering.models import UsageChange
from portal.models import Cursor
from portal.pipeline import log_read


def usage_changes_read(*, consumer: str) -> tuple[list[UsageChange], Cursor]:
    """The entries of metering's change log past `consumer`'s cursor, oldest first, and the
    cursor, locked: call it in the transaction that consumes them (portal.pipeline)."""
    return log_read(UsageChange, consumer=consumer, log="metering.usage")
