"""Metering's change log, for the stages that read it (portal.pipeline)."""

from metering.models import UsageChange
from portal.pipeline import LogRead, log_read


def usage_changes_read(*, consumer: str) -> LogRead:
    """The entries of metering's change log past `consumer`'s cursor, oldest first; the
    stage consumes them with portal.pipeline.log_consume in the transaction that acts."""
    return log_read(UsageChange, consumer=consumer, log="metering.usage")
