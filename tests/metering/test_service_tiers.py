"""Service tiers (kpis.md section 3, "Service tiers"; data-formats.md 6b): on every ingestion
path, refused by name when unknown, in the rollups, and judged by the tier's SLO."""

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from metering.domain.usage.compliance import tier_thresholds
from metering.domain.usage.fields import EventError
from metering.domain.usage.formats import cloudevents_to_items, openai_batch_to_items
from metering.domain.usage.json_batch import validate_json_batch
from metering.domain.usage.otlp import spans_to_items
from metering.domain.usage.validation import validate_events
from metering.models import Deployment, HourlyUsage
from metering.selectors.sla.months import sla_month_list
from metering.selectors.usage import usage_list
from metering.services.factory import VersionSpec, deployment_version_add
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import usage_fold
from portal.models import Tenant
from portal.periods import Period
from tests.metering.factories import make_deployment
from tests.metering.test_otlp import CHAT, _spans
from tests.metering.test_usage_formats import SAMPLES

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _event(**changes) -> dict:
    return {"id": "r1", "time": "2026-03-01T11:59:00Z", "tenant": "acme", "model": "m",
            "input_tokens": 10, "output_tokens": 5, **changes}  # fmt: skip


def _both(items) -> list:
    """The events of the full validator and of the native batch's fast one (same result)."""
    full, errors = validate_events(items=items, now=NOW)
    assert errors == []
    fast = validate_json_batch(data=json.dumps(items).encode(), now=NOW, max_events=100)
    assert fast == full
    return full


def test_both_validators_read_the_tier_standard_when_absent():
    events = _both([_event(id=f"r{i}", service_tier=t) for i, t in
                    enumerate(["priority", "flex", "batch", "standard"])] + [_event(id="r9")])  # fmt: skip
    assert [e.service_tier for e in events] == ["priority", "flex", "batch", "standard", "standard"]
    # The hash: a standard event's is the one before tiers existed; a tier changes it.
    [plain], [standard], [priority] = (
        validate_events(items=[_event(**tier)], now=NOW)[0]
        for tier in ({}, {"service_tier": "standard"}, {"service_tier": "priority"})
    )
    assert plain.payload_hash == standard.payload_hash != priority.payload_hash


@pytest.mark.parametrize("tier", ["scale", "default", "", 3])
def test_an_unknown_tier_refuses_the_batch_naming_service_tier(tier):
    _, errors = validate_events(items=[_event(), _event(id="r2", service_tier=tier)], now=NOW)
    assert errors == [
        EventError(1, "service_tier", "must be one of standard, priority, flex, batch "
                   "(leave it out for standard)")
    ]  # fmt: skip
    fast = validate_json_batch(
        data=json.dumps([_event(service_tier=tier)]).encode(), now=NOW, max_events=100
    )
    assert fast is None  # left to the full path, which names it


def test_cloudevents_carry_the_tier_and_openai_batch_lines_are_batch():
    items, errors = cloudevents_to_items(items=[{
        "specversion": "1.0", "type": "usage", "id": "gw-1", "source": "gw",
        "time": "2026-03-01T11:59:00Z", "subject": "acme",
        "data": {"model": "m", "input_tokens": 1, "output_tokens": 1, "service_tier": "flex"},
    }])  # fmt: skip
    assert errors == [] and items[0]["service_tier"] == "flex"
    body = (SAMPLES / "openai_batch_output_gpt-4o-mini.jsonl").read_bytes()
    items, errors = openai_batch_to_items(body=body, tenant="acme", pool=None)
    assert errors == [] and {item["service_tier"] for item in items} == {"batch"}


@pytest.mark.parametrize(
    ("value", "tier"), [("default", "standard"), ("scale", "priority"), ("flex", "flex")]
)
def test_otlp_reads_openai_response_service_tier(value, tier):
    spans = _spans(NOW, spans=[({**CHAT, "tenant.id": "acme", "gen_ai.usage.input_tokens": 5,
                                 "gen_ai.usage.output_tokens": 2,
                                 "openai.response.service_tier": value}, False)])  # fmt: skip
    read = spans_to_items(request=encode_spans(spans), tenant_attribute="tenant.id",
                          pool_attribute="pool", bound_tenant=None)  # fmt: skip
    assert read.errors == [] and read.items[0]["service_tier"] == tier


def test_tier_thresholds():
    spec = VersionSpec(
        r_ref=Decimal(1000), slo_ttft_ms=500, slo_tpot_ms=50, slo_ttft_ms_priority=200
    )
    assert tier_thresholds(spec, "standard") == (500, 50)
    assert tier_thresholds(spec, "priority") == (200, 50)  # TPOT: the standard one
    assert tier_thresholds(spec, "flex") == tier_thresholds(spec, "batch") == (None, None)


@pytest.mark.both_backends
def test_the_fold_keeps_tiers_apart_and_judges_each_by_its_slo(db, users):
    """TTFT 500 ms, priority 200 ms: a priority request at 300 ms misses, a standard one at
    300 ms meets; a flex one at 9 s meets (no latency SLO), a failed batch one does not. The
    usage API's rows are per tier."""
    Tenant.objects.create(slug="acme", name="Acme")
    make_deployment(model="m", ttft=500)
    deployment_version_add(
        deployment=Deployment.objects.get(), effective_from=datetime(2026, 2, 1, tzinfo=UTC),
        spec=VersionSpec(r_ref=Decimal(1000), slo_ttft_ms=500, slo_ttft_ms_priority=200), by=None,
    )  # fmt: skip
    hour = datetime(2026, 3, 1, 10, tzinfo=UTC)
    raw = [("priority", 300, "ok"), ("priority", 150, "ok"), ("standard", 300, "ok"),
           ("flex", 9000, "ok"), ("batch", 10, "error")]  # fmt: skip
    items = [_event(id=f"e{i}", time=(hour + timedelta(minutes=i)).isoformat(), service_tier=t,
                    ttft_ms=ttft, status=status) for i, (t, ttft, status) in enumerate(raw)]  # fmt: skip
    events, errors = validate_events(items=items, now=NOW)
    assert errors == []
    usage_ingest(events=events, received_at=NOW)
    usage_fold()

    rows = {r.service_tier: (r.requests, r.compliant_requests) for r in HourlyUsage.objects.all()}
    assert rows == {"priority": (2, 1), "standard": (1, 1), "flex": (1, 1), "batch": (1, 0)}
    listed = usage_list(user=users["operator"], period=Period(hour, hour + timedelta(hours=1)),
                        granularity="hour")  # fmt: skip
    assert [(r["service_tier"], r["requests"]) for r in listed] == [
        ("batch", 1),
        ("flex", 1),
        ("priority", 2),
        ("standard", 1),
    ]
    # Attainment and σ by tier: each event 15 tok, so σ follows the requests
    [sla] = sla_month_list(month_start=datetime(2026, 3, 1, tzinfo=UTC), now=NOW,
                           tenants=Tenant.objects.filter(slug="acme"))  # fmt: skip
    by_tier = {tier: (t.requests, t.slo_attainment, t.sla_delivery)
               for tier, t in sla.by_tier.items()}  # fmt: skip
    assert by_tier == {"batch": (1, 0, 0), "flex": (1, 1, 1),
                       "priority": (2, Fraction(1, 2), Fraction(1, 2)), "standard": (1, 1, 1)}  # fmt: skip
    assert sla.slo_attainment == Fraction(3, 5)
