"""SLA uptime and credits (kpis.md section 3b); every figure computed by hand.

April 2026 has 30 days: M = 30 x 86,400 = 2,592,000 s.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest

from billing.domain.credits import DEFAULT_CREDIT_TIERS, credit_amount, credit_pct_for, target_of
from metering.domain.sla import (
    Impact,
    ImpactChange,
    IncidentTimeline,
    MaintenanceInterval,
    incident_touches,
    maintenance_touches,
    uptime_compute,
)

D = Decimal
APRIL = datetime(2026, 4, 1, tzinfo=UTC)
MAY = datetime(2026, 5, 1, tzinfo=UTC)
MONTH_SECONDS = 2_592_000


def at(day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, 4, day, hour, minute, second, tzinfo=UTC)


def outage(start: datetime, seconds: int, impact: Impact = Impact.MAJOR_OUTAGE) -> IncidentTimeline:
    return IncidentTimeline(
        started_at=start, resolved_at=start + timedelta(seconds=seconds), impact=impact
    )


def announced(starts_at: datetime, ends_at: datetime) -> MaintenanceInterval:
    """A window announced a week ahead."""
    return MaintenanceInterval(
        announced_at=starts_at - timedelta(days=7), starts_at=starts_at, ends_at=ends_at
    )


def april(incidents=(), maintenance=(), now=None):
    return uptime_compute(
        month_start=APRIL,
        month_end=MAY,
        now=now,
        incidents=incidents,
        maintenance_windows=maintenance,
    )


def test_uptime_compute_without_incidents_is_one():
    result = april()

    assert result.month_seconds == MONTH_SECONDS
    assert result.maintenance_seconds == 0
    assert result.downtime_seconds == 0
    assert result.uptime == 1
    assert not result.is_month_to_date


def test_uptime_compute_43_2_minutes_of_major_outage_is_exactly_99_90_percent():
    # 43.2 min = 2,592 s; 1 - 2,592 / 2,592,000 = 0.999 exactly: not below 0.999, no credit
    result = april([outage(at(10, 12), 2_592)])

    assert result.downtime_seconds == 2_592
    assert result.uptime == Fraction(999, 1000)
    assert credit_pct_for(uptime=result.uptime) == 0


def test_uptime_compute_one_more_minute_earns_10_percent():
    # 2,652 s: 1 - 2,652 / 2,592,000 = 2,589,348 / 2,592,000 < 0.999 -> 10%
    result = april([outage(at(10, 12), 2_652)])

    assert result.uptime == Fraction(2_589_348, 2_592_000)
    assert credit_pct_for(uptime=result.uptime) == 10


@pytest.mark.parametrize(
    ("down_seconds", "expected_pct"),
    [
        (2_592, 0),  # 0.999 exactly: not < 0.999
        (2_593, 10),  # just below 0.999
        (25_920, 10),  # 0.99 exactly (7 h 12 min): not < 0.99
        (25_921, 25),  # just below 0.99
        (129_600, 25),  # 0.95 exactly (36 h): not < 0.95
        (129_601, 100),  # just below 0.95
    ],
)
def test_credit_pct_for_tier_edges(down_seconds, expected_pct):
    result = april([outage(at(3), down_seconds)])

    assert result.uptime == 1 - Fraction(down_seconds, MONTH_SECONDS)
    assert credit_pct_for(uptime=result.uptime) == expected_pct


def test_credit_pct_for_highest_matching_percent_wins_whatever_the_order():
    tiers = [(D("0.95"), D(100)), (D("0.999"), D(10)), (D("0.99"), D(25))]

    assert credit_pct_for(uptime=Fraction(98, 100), tiers=tiers) == 25
    assert credit_pct_for(uptime=D("0.5"), tiers=tiers) == 100
    assert credit_pct_for(uptime=None) == 0  # no serviceable time
    assert credit_pct_for(uptime=D("0.5"), tiers=[]) == 0


def test_credit_pct_for_reads_float_thresholds_as_written():
    # float 0.999 is slightly below 999/1000 in binary; read as written, 0.999 is not < 0.999
    assert credit_pct_for(uptime=Fraction(999, 1000), tiers=[(0.999, 10)]) == 0


def test_target_of_is_the_highest_threshold():
    assert target_of() == D("0.999")
    assert target_of(tiers=DEFAULT_CREDIT_TIERS) == D("0.999")
    assert target_of(tiers=[(D("0.95"), D(100)), (D("0.9995"), D(5))]) == D("0.9995")
    assert target_of(tiers=[]) is None


def test_credit_amount_rounds_half_up_to_cents():
    # 10% of 1,234.55 = 123.455 -> 123.46; 25% of 0.10 = 0.025 -> 0.03
    assert credit_amount(credit_pct=D(10), billed_usage_amount=D("1234.55")) == D("123.46")
    assert credit_amount(credit_pct=D(25), billed_usage_amount=D("0.10")) == D("0.03")
    assert credit_amount(credit_pct=D(0), billed_usage_amount=D("99.99")) == D("0.00")
    assert credit_amount(credit_pct=D(100), billed_usage_amount=D("99.99")) == D("99.99")


def test_uptime_compute_partial_outage_weighs_0_3():
    # 10 h partial = 36,000 s x 0.3 = 10,800 s; 1 - 10,800 / 2,592,000 = 1 - 1/240
    result = april([outage(at(8), 36_000, Impact.PARTIAL_OUTAGE)])

    assert result.downtime_seconds == D("10800.0")
    assert result.uptime == Fraction(239, 240)
    assert credit_pct_for(uptime=result.uptime) == 10


def test_uptime_compute_degraded_counts_zero():
    result = april([outage(at(8), 100 * 3600, Impact.DEGRADED)])

    assert result.downtime_seconds == 0
    assert result.uptime == 1


def test_uptime_compute_excludes_maintenance_from_both_terms():
    # maintenance Apr 5 00:00 - Apr 6 00:00 (86,400 s) as two overlapping windows;
    # major outage Apr 5 22:00 - Apr 6 01:00: only 1 h (3,600 s) lies outside it.
    # 1 - 3,600 / (2,592,000 - 86,400) = 1 - 3,600 / 2,505,600 = 1 - 1/696
    result = april(
        [IncidentTimeline(started_at=at(5, 22), resolved_at=at(6, 1), impact="major_outage")],
        [
            announced(at(5), at(5, 12)),
            announced(at(5, 6), at(6)),
        ],
    )

    assert result.maintenance_seconds == 86_400
    assert result.downtime_seconds == 3_600
    assert result.uptime == Fraction(695, 696)


def test_uptime_compute_excludes_only_maintenance_announced_before_it_started():
    # a major outage Apr 5 00:00 - 12:00 (43,200 s) during a window of the same 12 h:
    # announced a day ahead the window is excluded (uptime 1); announced when it started or
    # later it is not maintenance (kpis.md 3b): 1 - 43,200 / 2,592,000 = 59/60.
    incident = outage(at(5), 12 * 3600)

    def window(announced_at: datetime):
        return MaintenanceInterval(announced_at=announced_at, starts_at=at(5), ends_at=at(5, 12))

    ahead = april([incident], [window(at(4))])
    on_time = april([incident], [window(at(5))])
    after = april([incident], [window(at(5, 6))])

    assert (ahead.maintenance_seconds, ahead.downtime_seconds, ahead.uptime) == (43_200, 0, 1)
    for late in (on_time, after):
        assert (late.maintenance_seconds, late.downtime_seconds) == (0, 43_200)
        assert late.uptime == Fraction(59, 60)


def test_uptime_compute_clips_maintenance_to_the_month():
    # window Mar 31 12:00 - Apr 1 06:00 counts only its April part: 21,600 s
    result = april(maintenance=[announced(datetime(2026, 3, 31, 12, tzinfo=UTC), at(1, 6))])

    assert result.maintenance_seconds == 21_600
    assert result.uptime == 1


def test_uptime_compute_overlapping_incidents_count_once_at_the_highest_weight():
    # partial 10:00-14:00 with a major 11:00-12:00 inside:
    # 1 h x 1 + 3 h x 0.3 = 3,600 + 3,240 = 6,840 s; 1 - 6,840 / 2,592,000 = 7,181 / 7,200
    result = april(
        [
            IncidentTimeline(
                started_at=at(10, 10), resolved_at=at(10, 14), impact=Impact.PARTIAL_OUTAGE
            ),
            IncidentTimeline(
                started_at=at(10, 11), resolved_at=at(10, 12), impact=Impact.MAJOR_OUTAGE
            ),
        ]
    )

    assert result.downtime_seconds == 6_840
    assert result.uptime == Fraction(7_181, 7_200)


def test_uptime_compute_two_overlapping_majors_are_not_double_counted():
    # 10:00-11:00 and 10:30-11:30 cover 1.5 h = 5,400 s, not 7,200
    result = april([outage(at(10, 10), 3_600), outage(at(10, 10, 30), 3_600)])

    assert result.downtime_seconds == 5_400


def test_uptime_compute_impact_changes_with_later_updates():
    # degraded 10:00-11:00 (0), major 11:00-11:30 (1,800 s), partial 11:30-12:30
    # (3,600 x 0.3 = 1,080): D = 2,880; 1 - 2,880 / 2,592,000 = 899/900 < 0.999 -> 10%
    incident = IncidentTimeline(
        started_at=at(10, 10),
        resolved_at=at(10, 12, 30),
        impact=Impact.DEGRADED,
        changes=(
            ImpactChange(time=at(10, 11, 30), impact=Impact.PARTIAL_OUTAGE),
            ImpactChange(time=at(10, 11), impact=Impact.MAJOR_OUTAGE),
        ),
    )

    result = april([incident])

    assert result.downtime_seconds == 2_880
    assert result.uptime == Fraction(899, 900)
    assert credit_pct_for(uptime=result.uptime) == 10


def test_uptime_compute_ongoing_incident_month_to_date_uses_elapsed_time():
    # now Apr 11 00:00: M = 10 days = 864,000 s; major since Apr 10 23:00, unresolved:
    # D = 3,600; 1 - 3,600 / 864,000 = 1 - 1/240
    incident = IncidentTimeline(started_at=at(10, 23), resolved_at=None, impact="major_outage")

    result = april([incident], now=at(11))

    assert result.is_month_to_date
    assert result.period_end == at(11)
    assert result.month_seconds == 864_000
    assert result.downtime_seconds == 3_600
    assert result.uptime == Fraction(239, 240)


def test_uptime_compute_ongoing_incident_runs_to_month_end():
    # unresolved major since Apr 30 23:00, month closed: 3,600 s of 2,592,000
    incident = IncidentTimeline(started_at=at(30, 23), resolved_at=None, impact="major_outage")

    result = april([incident])

    assert result.downtime_seconds == 3_600
    assert result.uptime == 1 - Fraction(3_600, MONTH_SECONDS)


def test_uptime_compute_now_after_the_month_is_the_whole_month():
    result = april(now=datetime(2026, 6, 1, tzinfo=UTC))

    assert not result.is_month_to_date
    assert result.month_seconds == MONTH_SECONDS


def test_uptime_compute_without_serviceable_time_is_null():
    before = april(now=datetime(2026, 3, 20, tzinfo=UTC))
    all_maintenance = april(maintenance=[announced(APRIL, MAY)])

    assert before.month_seconds == 0
    assert before.uptime is None
    assert all_maintenance.uptime is None
    assert credit_pct_for(uptime=all_maintenance.uptime) == 0


def test_uptime_compute_counts_microseconds_exactly():
    # 0.5 s of major outage: 1 - 0.5 / 2,592,000 = 1 - 1/5,184,000
    incident = IncidentTimeline(
        started_at=at(2),
        resolved_at=at(2) + timedelta(microseconds=500_000),
        impact=Impact.MAJOR_OUTAGE,
    )

    result = april([incident])

    assert result.downtime_seconds == D("0.5")
    assert result.uptime == 1 - Fraction(1, 5_184_000)


def test_incident_timeline_rejects_resolution_before_start():
    with pytest.raises(ValueError, match="resolved_at"):
        IncidentTimeline(started_at=at(2), resolved_at=at(1), impact="degraded")


def test_incident_touches_tenants_and_deployments_rule():
    used = {"qwen@b200"}
    assert incident_touches(
        incident_tenants=[], incident_deployments=[], tenant="acme", deployments_used=used
    )
    assert incident_touches(
        incident_tenants=["acme"],
        incident_deployments=["qwen@b200", "r1@h200"],
        tenant="acme",
        deployments_used=used,
    )
    assert not incident_touches(
        incident_tenants=["globex"], incident_deployments=[], tenant="acme", deployments_used=used
    )
    assert not incident_touches(
        incident_tenants=[],
        incident_deployments=["r1@h200"],
        tenant="acme",
        deployments_used=used,
    )


def test_maintenance_touches_windows_on_used_deployments():
    assert maintenance_touches(window_deployments=["qwen@b200"], deployments_used={"qwen@b200"})
    assert not maintenance_touches(window_deployments=["r1@h200"], deployments_used={"qwen@b200"})
    assert maintenance_touches(window_deployments=[], deployments_used=set())
