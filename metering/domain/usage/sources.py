"""Whether an ingestion source is sending (kpis.md section 3c, "Source silent"): the one rule
for the metering page and the `source_silent` alert. Pure Python, no Django."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

RECENT: Final = timedelta(hours=24)  # a source that sent in this window is expected to send
QUIET_FOR: Final = timedelta(minutes=15)  # the alert rule's default N


class SourceState(StrEnum):
    ACTIVE = "active"  # sent within QUIET_FOR
    SILENT = "silent"  # sent in the last 24 h, quiet since, while its engines keep serving
    IDLE = "idle"  # quiet, and its engines quiet too (or it sent nothing for 24 h)


def source_state(
    *,
    last_received_at: datetime,
    now: datetime,
    engines_grew: bool,
    quiet_for: timedelta = QUIET_FOR,
) -> SourceState:
    """A source that sent events in the last 24 h and none for `quiet_for`, while the
    engine counters of its deployments grew since (`engines_grew`), is silent; a quiet one
    whose engines are quiet too is idle."""
    if now - last_received_at < quiet_for:
        return SourceState.ACTIVE
    if now - last_received_at <= RECENT and engines_grew:
        return SourceState.SILENT
    return SourceState.IDLE
