"""Helpers shared by the flywheel's writes."""

from __future__ import annotations

from datetime import UTC, datetime


def hour_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
