"""Demo factory, SLA part: two incidents and one maintenance window in the demo's 30 days.

A 40-minute major outage of Qwen3-235B on h200-a (a failed NVLink switch, public: every
tenant using Qwen), a partial outage of DeepSeek-R1 on b200-a (a KV-cache eviction storm on
long prompts: degraded, then partial, then degraded again) that touched only the three
tenants sending long prompts, and a two-hour maintenance of the h100-a pool announced a week
ahead. Either incident alone leaves a month within the 99.9% target; the three tenants hit by
both miss it and get a credit, the others do not. Idempotent: each is created once, keyed by
its title.
"""

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TextIO

from django.db import transaction

from metering.demo.parameters import last_month_start
from metering.models import Deployment, Incident, MaintenanceWindow, Pool
from metering.services.sla.incidents import incident_create, incident_edit, incident_update_add
from metering.services.sla.maintenance import maintenance_window_create
from portal import clock
from portal.demo import demo_step
from portal.models import Tenant

MAJOR_TITLE = "Qwen3-235B requests failing on h200-a"

PARTIAL_TITLE = "DeepSeek-R1 slow and partly failing on b200-a"

MAINTENANCE_TITLE = "h100-a: NCCL and driver upgrade"

LONG_PROMPT_TENANTS = ("initech", "wayne", "stark")  # the partial outage touched only these


def _incident(
    *,
    title: str,
    severity: str,
    impact: str,
    started_at: datetime,
    deployment: str,
    message: str,
    updates: Iterable[tuple[int, str, str, str]],
    tenants: Iterable[str] = (),
) -> Incident:
    """Open an incident on one deployment and post its updates, each (minutes after the
    start, status, impact or "" for unchanged, message)."""
    incident = incident_create(
        title=title,
        severity=severity,
        impact=impact,
        started_at=started_at,
        deployments=[Deployment.objects.get(slug=deployment)],
        tenants=list(Tenant.objects.filter(slug__in=tenants)),
        message=message,
        by=None,
    )
    for minutes, status, new_impact, text in updates:
        incident_update_add(
            incident=incident,
            status=status,
            impact=new_impact,
            message=text,
            time=started_at + timedelta(minutes=minutes),
            by=None,
        )
    return incident


def _major(day: datetime) -> None:
    incident = _incident(
        title=MAJOR_TITLE,
        severity="sev1",
        impact="major_outage",
        started_at=day + timedelta(hours=14, minutes=12),
        deployment="qwen3-235b-a22b@h200-a",
        message="Requests to Qwen3-235B-A22B return 503. We are investigating.",
        updates=(
            (
                13,
                "identified",
                "",
                "A failed NVLink switch took two nodes out of the serving group.",
            ),
            (31, "monitoring", "", "Traffic moved to healthy nodes; error rate back to baseline."),
            (40, "resolved", "", "Resolved: 40 minutes of failed requests on h200-a."),
        ),
    )
    incident_edit(
        incident=incident,
        cause="One NVLink switch failed; the serving group kept routing to its nodes "
        "until health checks marked them down 12 minutes later.",
        remediation="Health checks now probe NVLink bandwidth every 30 s; the router "
        "drains a node after two failed probes.",
        by=None,
    )


def _partial(day: datetime) -> None:
    _incident(
        title=PARTIAL_TITLE,
        severity="sev2",
        impact="degraded",
        started_at=day + timedelta(hours=3),
        deployment="deepseek-r1@b200-a",
        tenants=LONG_PROMPT_TENANTS,
        message="Time to first token is above its SLO for long prompts.",
        updates=(
            (
                40,
                "identified",
                "partial_outage",
                "KV-cache eviction storm: some requests time out.",
            ),
            (120, "monitoring", "degraded", "Prefix cache resized; timeouts stopped."),
            (150, "resolved", "", "Latency back within SLO."),
        ),
    )


@demo_step("metering: incidents and maintenance")
@transaction.atomic
def demo_incidents(*, stdout: TextIO) -> None:
    start = last_month_start(clock.now())
    made = []
    if not Incident.objects.filter(title=MAJOR_TITLE, started_at__gte=start).exists():
        _major(start + timedelta(days=9))
        made.append("major outage")
    if not Incident.objects.filter(title=PARTIAL_TITLE, started_at__gte=start).exists():
        _partial(start + timedelta(days=18))
        made.append("partial outage")
    if not MaintenanceWindow.objects.filter(title=MAINTENANCE_TITLE, starts_at__gte=start).exists():
        starts = start + timedelta(days=22, hours=2)
        maintenance_window_create(
            title=MAINTENANCE_TITLE,
            description="Rolling upgrade; requests are served by the other pools meanwhile.",
            starts_at=starts,
            ends_at=starts + timedelta(hours=2),
            pools=[Pool.objects.get(slug="h100-a")],
            by=None,
            now=starts - timedelta(days=7),  # announced a week ahead
        )
        made.append("maintenance window")
    stdout.write(f"  {', '.join(made) or 'incidents already loaded'}\n")
