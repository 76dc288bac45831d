"""Cycle history: the cycles, the lever applications, and a cycle's default period."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import QuerySet

from flywheel.models import Cycle, LeverApplication
from portal.periods import Period, day_floor


def cycle_list() -> QuerySet[Cycle]:
    return Cycle.objects.select_related("goal").prefetch_related("evaluations__lever")


def application_list() -> QuerySet[LeverApplication]:
    return LeverApplication.objects.select_related("lever", "evaluated_by", "updated_lever")


def last_full_week(*, now: datetime) -> Period:
    """The 7 whole UTC days before today: a cycle's default period."""
    today = day_floor(now)
    return Period(today - timedelta(days=7), today)


def cycle_waiting(*, queued_at: datetime) -> Period | None:
    """The period of the cycle queued at `queued_at` (the last full week then) while the
    cycle job has not run it since; None once it has."""
    period = last_full_week(now=queued_at)
    ran = Cycle.objects.filter(
        period_start=period.start, period_end=period.end, ran_at__gte=queued_at
    ).exists()
    return None if ran else period
