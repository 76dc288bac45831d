"""Every API operation of the OpenAPI schema, and a valid request for each write.

`schema_operations()` reads the operations from drf-spectacular's generator (what
/api/schema/ serves). `WRITES` holds, per non-GET operation, the roles that may do it and a
builder of a fresh valid request, so a test can show that the allowed roles succeed and
every other role is refused with nothing changed. A new write operation without an entry
fails `test_every_write_operation_has_a_case`.
"""

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.apps import apps
from django.db import connection

from billing.models import Reservation
from billing.services.invoices.draft import invoice_draft
from billing.services.invoices.issue import invoice_finalize
from billing.services.pricing import contract_create, price_create, promotion_grant
from billing.services.reservations import service_tier_create
from flywheel.models import Lever
from flywheel.services.loop.applications import lever_apply
from flywheel.services.loop.versions import goal_create, lever_create
from flywheel.services.tfom import cost_model_create, factory_costs_create
from metering.domain.usage.validation import validate_events
from metering.models import Pool, ScrapeTarget, ServedModel
from metering.services.sla.maintenance import maintenance_window_create
from metering.services.usage.ingest import usage_ingest
from metering.services.usage.rollup import usage_fold
from portal import clock
from portal.models import AlertRule, Tenant, WebhookEndpoint
from portal.webhooks import secret_new
from tests.reliability.world import World

HTTP_METHODS = ("get", "post", "put", "patch", "delete")
FUTURE = datetime(2030, 1, 1, tzinfo=UTC)
JSON = "application/json"


@functools.cache
def schema() -> dict:
    """The OpenAPI document /api/schema/ serves."""
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def schema_operations() -> set[tuple[str, str]]:
    """(METHOD, path template) of every operation in the schema."""
    return {
        (method.upper(), path)
        for path, item in schema()["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }


def refusal_errors(response) -> list[dict]:
    """A refusal's errors as {"field", "message"}: the API's {"errors": [...]}, or the
    google.rpc.Status an OTLP endpoint answers with (protobuf or JSON), one error naming
    no field."""
    from google.rpc.status_pb2 import Status

    media = response["Content-Type"].split(";")[0]
    if media == "application/x-protobuf":
        return [{"field": "", "message": Status.FromString(response.content).message}]
    assert media == "application/json", response.content[:200]
    answer = response.json()
    if "errors" not in answer:  # {"code", "message"}: google.rpc.Status as JSON
        return [{"field": "", "message": answer["message"]}]
    return answer["errors"]


def url(template: str, params: dict[str, Any]) -> str:
    path = template
    for name, value in params.items():
        path = path.replace("{" + name + "}", str(value))
    assert "{" not in path, path
    return path


def future(n: int) -> str:
    """A distinct whole future hour per call (effective-dated records refuse duplicates)."""
    return (FUTURE + timedelta(hours=n)).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Req:
    """One HTTP request: path parameters and query, body and its media type."""

    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None  # JSON-able, or bytes/str sent as they are
    content_type: str = JSON
    query: str = ""

    def path(self, template: str) -> str:
        return url(template, self.params) + (f"?{self.query}" if self.query else "")

    def payload(self) -> bytes | str:
        if self.body is None:
            return b""
        if isinstance(self.body, bytes | str):
            return self.body
        return json.dumps(self.body)


@dataclass(frozen=True)
class Write:
    """A non-GET operation: the roles that may do it (through a session) and a builder of a
    fresh valid request (`make(world, n)`, n distinct per call)."""

    roles: frozenset[str]
    make: Callable[[World, int], Req]
    scope: str = "admin"  # the token scope it needs
    creates: str | None = None  # model label of the row a POST creates (for read-backs)


def _curve_point(model: str, n: int) -> dict:
    """A reference curve point of `model` (kpis.md 6c), its concurrency n + 1."""
    return {
        "model": model, "gpu_type": "H100", "tp": 1, "precision": "fp8", "concurrency": n + 1,
        "tok_s_per_gpu": 2000, "tok_s_per_user": 40, "token_basis": "output", "isl": 1000,
        "osl": 250,
    }  # fmt: skip


OPERATOR = frozenset({"operator"})
COMMERCIAL = frozenset({"operator", "finance"})
NOTIFYING = frozenset({"operator", "finance", "tenant"})  # endpoints of tenant A
HOOK = {"event_types": ["invoice.issued"], "tenant": "tenant-a"}
LEVER_EFFECTS = {"occupancy": {"low": "1.05", "typical": "1.1", "high": "1.2"}}


def _usage_month(world: World, n: int) -> datetime:
    """Usage of tenant A in a month of its own (April 2026 on), rolled up."""
    month = datetime(2026, 4 + n % 7, 1, tzinfo=UTC)
    items = [
        {
            "id": f"month-{n}-{i}",
            "time": (month + timedelta(hours=1, minutes=i)).isoformat(),
            "tenant": "tenant-a",
            "model": "llama-70b",
            "input_tokens": 1_000_000,
            "cached_tokens": 0,
            "output_tokens": 1_000_000,
        }
        for i in range(2)
    ]

    events, errors = validate_events(items=items, now=clock.now())
    assert not errors, errors
    usage_ingest(events=events, received_at=clock.now())
    usage_fold()
    return month


def _draft(world: World, n: int):
    invoice, _ = invoice_draft(tenant=world.tenant_a, month_start=_usage_month(world, n))
    return invoice


def _issued(world: World, n: int):
    return invoice_finalize(invoice=_draft(world, n), by=None)


def _endpoint(world: World, n: int) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(
        url=f"https://hooks.example.com/spare-{n}", tenant=world.tenant_a, secret=secret_new()
    )


def _budgets(world: World) -> dict:
    """Tenant A holds one budget: a new one replaces its rule (the body names tenant A)."""
    AlertRule.objects.filter(kind="budget", tenant=world.tenant_a).delete()
    return {"tenant": "tenant-a"}


def _budget_rule(world: World) -> AlertRule:
    """Tenant A's budget rule: the world's, the one a POST replaced it with, or a new one."""
    rule = AlertRule.objects.filter(kind="budget", tenant=world.tenant_a).first()
    return rule or AlertRule.objects.create(
        kind="budget", tenant=world.tenant_a, params={"amount": "1.00", "thresholds": [50]}
    )


def _model(n: int) -> ServedModel:
    return ServedModel.objects.create(slug=f"model-{n}", name=f"Model {n}")


def _pool(n: int) -> Pool:
    return Pool.objects.create(slug=f"pool-{n}", name=f"Pool {n}", gpu_type="H100", gpu_count=8)


def _tenant(n: int) -> Tenant:
    return Tenant.objects.create(slug=f"tenant-{n}", name=f"Tenant {n}")


def _target(world: World, n: int) -> ScrapeTarget:
    return ScrapeTarget.objects.create(
        url=f"http://127.0.0.1:9/metrics-{n}", kind="vllm", pool=world.pool
    )


def _lever(n: int, *, effective_from: datetime = FUTURE) -> str:
    """A lever `lever-n` in the catalogue from `effective_from`; its slug."""
    return lever_create(
        slug=f"lever-{n}",
        name=f"Lever {n}",
        description="batching",
        effects=LEVER_EFFECTS,
        one_time_cost=Decimal(0),
        monthly_cost=Decimal(0),
        effective_from=effective_from,
    ).slug


def _event(n: int, i: int = 0) -> dict:
    return {
        "id": f"write-{n}-{i}",
        "time": "2026-03-02T10:00:00Z",
        "tenant": "tenant-a",
        "model": "llama-70b",
        "input_tokens": 10,
        "cached_tokens": 0,
        "output_tokens": 5,
    }


def _cloudevent(n: int) -> dict:
    event = _event(n)
    return {
        "specversion": "1.0",
        "type": "token.usage",
        "id": event.pop("id"),
        "source": "fuzz",
        "time": event.pop("time"),
        "data": event,
    }


def _otlp_spans(n: int) -> dict:
    """An OTLP/JSON trace export of one GenAI span (ids in hex, as OTLP/JSON writes them)."""
    end = 1772445600 * 10**9  # 2026-03-02T10:00:00Z
    attributes = [
        {"key": "tenant.id", "value": {"stringValue": "tenant-a"}},
        {"key": "gen_ai.request.model", "value": {"stringValue": "llama-70b"}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "10"}},
        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "5"}},
    ]
    span = {"traceId": f"{n:032x}", "spanId": f"{n:016x}", "name": "chat",
            "startTimeUnixNano": str(end - 10**9), "endTimeUnixNano": str(end),
            "attributes": attributes}  # fmt: skip
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "fuzz"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}


def _otlp_metrics(n: int) -> dict:
    """An OTLP/JSON metric export: one delta point of gen_ai.client.token.usage."""
    point = {
        "attributes": [
            {"key": "gen_ai.request.model", "value": {"stringValue": "llama-70b"}},
            {"key": "gen_ai.token.type", "value": {"stringValue": "output"}},
        ],
        "startTimeUnixNano": "1772445000000000000", "timeUnixNano": "1772445600000000000",
        "count": "1", "sum": 5 + n, "bucketCounts": ["1"], "explicitBounds": [],
    }  # fmt: skip
    metric = {"name": "gen_ai.client.token.usage", "unit": "{token}",
              "histogram": {"dataPoints": [point], "aggregationTemporality": 1}}  # fmt: skip
    return {"resourceMetrics": [{"scopeMetrics": [{"metrics": [metric]}]}]}


def _openai_line(n: int) -> str:
    return json.dumps(
        {
            "id": f"batch_req_{n}",
            "custom_id": f"request-{n}",
            "response": {
                "status_code": 200,
                "request_id": f"r{n}",
                "body": {
                    "id": f"chatcmpl-{n}",
                    "object": "chat.completion",
                    "created": 1772445600,  # 2026-03-02T10:00:00Z
                    "model": "llama-70b",
                    "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
                },
            },
            "error": None,
        }
    )


PROMETHEUS_TEXT = (
    "# TYPE vllm:generation_tokens counter\n"
    'vllm:generation_tokens_total{model_name="llama-70b"} 100\n'
)

COST_MODEL = {
    "pool": "h100-a",
    "capex_per_gpu": "30000",
    "depreciation_months": 60,
    "power_kw_per_gpu": "1.2",
    "pue": "1.3",
    "electricity_price_per_kwh": "0.1",
    "hosting_per_gpu_month": "200",
}


def _dated(path: str, roles: frozenset[str], label: str, body: dict, create) -> dict:
    """The POST and DELETE of an effective-dated resource at `path`: POST `body` effective
    from a distinct future hour; DELETE the row `create(world, at)` makes effective from one."""
    return {
        ("POST", path): Write(
            roles, lambda w, n: Req(body={**body, "effective_from": future(n)}), creates=label
        ),
        ("DELETE", f"{path}{{id}}/"): Write(
            roles, lambda w, n: Req(params={"id": create(w, FUTURE + timedelta(hours=n)).pk})
        ),
    }


def _catalogue(path: str, key: str, label: str, *, post, spare, put, existing, patch) -> dict:
    """The POST, PUT, PATCH and DELETE of an operator's catalogue resource at `path`, its rows
    named by `key`: POST `post(n)`; PUT `put(n)` onto, and DELETE, a row `spare(world, n)`
    makes; PATCH `patch(n)` onto the world's row `existing(world)`."""
    item = f"{path}{{{key}}}/"
    return {
        ("POST", path): Write(OPERATOR, lambda w, n: Req(body=post(n)), creates=label),
        ("PUT", item): Write(OPERATOR, lambda w, n: Req(params={key: spare(w, n)}, body=put(n))),
        ("PATCH", item): Write(
            OPERATOR, lambda w, n: Req(params={key: existing(w)}, body=patch(n))
        ),
        ("DELETE", item): Write(OPERATOR, lambda w, n: Req(params={key: spare(w, n)})),
    }


WRITES: dict[tuple[str, str], Write] = {
    ("POST", "/api/v1/capacity"): Write(
        OPERATOR,
        lambda w, n: Req(
            body=[
                {
                    "pool": "h100-a",
                    "time": (datetime(2026, 3, 1, tzinfo=UTC) + timedelta(minutes=n)).isoformat(),
                    "gpus_installed": 8,
                    "gpus_healthy": 8,
                    "gpus_busy": 4,
                }
            ]
        ),
        scope="ingest",
    ),
    ("POST", "/api/v1/deployments/"): Write(
        OPERATOR,
        lambda w, n: Req(
            body={
                "slug": f"{_model(n).slug}@h100-a",
                "model": f"model-{n}",
                "pool": "h100-a",
                "r_ref": "1000",
                "slo_ttft_ms": 2000,
            }
        ),
        creates="metering.Deployment",
    ),
    ("POST", "/api/v1/deployments/{slug}/versions/"): Write(
        OPERATOR,
        lambda w, n: Req(
            params={"slug": w.deployment.slug},
            body={"effective_from": future(n), "r_ref": "1100", "w_in": "0"},
        ),
    ),
    ("POST", "/api/v1/flywheel/cycles/"): Write(
        OPERATOR,
        lambda w, n: Req(body={"from": "2026-03-01", "to": "2026-03-08"}),
        creates="flywheel.Cycle",
    ),
    ("POST", "/api/v1/capacity-plan/what-if"): Write(
        COMMERCIAL,  # a computation that changes nothing: operators and finance (sales)
        lambda w, n: Req(body={"demand": {w.deployment.model.slug: 1000 + n}}),
        scope="read",
    ),
    ("POST", "/api/v1/reference-curves"): Write(
        OPERATOR,
        lambda w, n: Req(body=[_curve_point(w.deployment.model.slug, n)]),
    ),
    ("POST", "/api/v1/flywheel/scenarios"): Write(
        COMMERCIAL,  # a computation that changes nothing: operators and finance
        lambda w, n: Req(
            body={"from": "2026-03-01", "to": "2026-04-01", "targets": {"occupancy": "0.8"}}
        ),
        scope="read",
    ),
    ("POST", "/api/v1/lever-applications/"): Write(
        OPERATOR,
        lambda w, n: Req(
            body={
                "lever": _lever(n, effective_from=datetime(2026, 1, 1, tzinfo=UTC)),
                "applied_at": "2026-03-10T00:00:00Z",
            }
        ),
        creates="flywheel.LeverApplication",
    ),
    ("DELETE", "/api/v1/lever-applications/{id}/"): Write(
        OPERATOR,
        lambda w, n: Req(
            params={
                "id": lever_apply(
                    slug=_lever(n, effective_from=datetime(2026, 1, 1, tzinfo=UTC)),
                    applied_at=datetime(2026, 3, 10, tzinfo=UTC),
                ).pk
            }
        ),
    ),
    ("POST", "/api/v1/levers/"): Write(
        OPERATOR,
        lambda w, n: Req(
            body={
                "slug": f"new-lever-{n}",
                "name": "Batching",
                "description": "larger batches",
                "effects": LEVER_EFFECTS,
                "one_time_cost": "1000",
                "monthly_cost": "10",
                "effective_from": future(n),
            }
        ),
        creates="flywheel.Lever",
    ),
    ("DELETE", "/api/v1/levers/{id}/"): Write(
        OPERATOR,
        lambda w, n: Req(params={"id": Lever.objects.get(slug=_lever(n)).pk}),
    ),
    ("POST", "/api/v1/incidents/"): Write(
        OPERATOR,
        lambda w, n: Req(
            body={
                "title": f"Incident {n}",
                "severity": "sev3",
                "impact": "degraded",
                "started_at": "2026-03-10T10:00:00Z",
                "deployments": [w.deployment.slug],
                "tenants": ["tenant-a"],
            }
        ),
        creates="metering.Incident",
    ),
    ("PATCH", "/api/v1/incidents/{id}/"): Write(
        OPERATOR,
        lambda w, n: Req(params={"id": w.incident_a.pk}, body={"cause": f"fan {n}"}),
    ),
    ("POST", "/api/v1/incidents/{id}/updates/"): Write(
        OPERATOR,
        lambda w, n: Req(
            params={"id": w.incident_a.pk}, body={"status": "resolved", "message": f"note {n}"}
        ),
    ),
    ("POST", "/api/v1/invoices/{id}/finalize/"): Write(
        COMMERCIAL, lambda w, n: Req(params={"id": _draft(w, n).pk})
    ),
    ("POST", "/api/v1/invoices/{id}/pay/"): Write(
        COMMERCIAL, lambda w, n: Req(params={"id": _issued(w, n).pk})
    ),
    ("POST", "/api/v1/invoices/{id}/void/"): Write(
        COMMERCIAL,
        lambda w, n: Req(params={"id": _issued(w, n).pk}, body={"reason": "typo"}),
    ),
    ("POST", "/api/v1/tenants/{tenant}/projects/"): Write(
        NOTIFYING,
        lambda w, n: Req(params={"tenant": "tenant-a"}, body={"slug": f"p{n}", "name": f"P {n}"}),
        scope="notify",
        creates="portal.Project",
    ),
    ("PATCH", "/api/v1/tenants/{tenant}/projects/{slug}/"): Write(
        NOTIFYING,
        lambda w, n: Req(params={"tenant": "tenant-a", "slug": "search"}, body={"name": f"S {n}"}),
        scope="notify",
    ),
    ("POST", "/api/v1/webhook-endpoints/"): Write(
        NOTIFYING,
        lambda w, n: Req(body={"url": f"https://hooks.example.com/{n}", **HOOK}),
        scope="notify",
        creates="portal.WebhookEndpoint",
    ),
    ("PUT", "/api/v1/webhook-endpoints/{id}/"): Write(
        NOTIFYING,
        lambda w, n: Req(
            params={"id": w.endpoint_a.pk},
            body={"url": f"https://hooks.example.com/{n}", "enabled": True, **HOOK},
        ),
        scope="notify",
    ),
    ("PATCH", "/api/v1/webhook-endpoints/{id}/"): Write(
        NOTIFYING,
        lambda w, n: Req(params={"id": w.endpoint_a.pk}, body={"description": f"hook {n}"}),
        scope="notify",
    ),
    ("DELETE", "/api/v1/webhook-endpoints/{id}/"): Write(
        NOTIFYING, lambda w, n: Req(params={"id": _endpoint(w, n).pk}), scope="notify"
    ),
    ("POST", "/api/v1/webhook-endpoints/{id}/rotate/"): Write(
        NOTIFYING, lambda w, n: Req(params={"id": w.endpoint_a.pk}), scope="notify"
    ),
    ("POST", "/api/v1/deliveries/{id}/replay"): Write(
        NOTIFYING, lambda w, n: Req(params={"id": w.delivery_a.pk}), scope="notify"
    ),
    ("POST", "/api/v1/alert-rules/"): Write(
        NOTIFYING,
        lambda w, n: Req(body={"kind": "budget", "params": {"amount": f"{n}.00"}, **_budgets(w)}),
        scope="notify",
        creates="portal.AlertRule",
    ),
    ("PUT", "/api/v1/alert-rules/{id}/"): Write(
        NOTIFYING,
        lambda w, n: Req(
            params={"id": _budget_rule(w).pk},
            body={"kind": "budget", "tenant": "tenant-a", "params": {"amount": f"{n}.00"}},
        ),
        scope="notify",
    ),
    ("PATCH", "/api/v1/alert-rules/{id}/"): Write(
        NOTIFYING,
        lambda w, n: Req(params={"id": _budget_rule(w).pk}, body={"level": "critical"}),
        scope="notify",
    ),
    ("DELETE", "/api/v1/alert-rules/{id}/"): Write(
        NOTIFYING, lambda w, n: Req(params={"id": _budget_rule(w).pk}), scope="notify"
    ),
    ("POST", "/api/v1/credit-notes/"): Write(
        COMMERCIAL,
        lambda w, n: Req(
            body={"invoice": _issued(w, n).number, "reason": "goodwill", "amount": "0.01"}
        ),
        creates="billing.CreditNote",
    ),
    # A month without data: its close locks it and bills nothing (the world's March stays
    # open for the other writes).
    ("POST", "/api/v1/close"): Write(COMMERCIAL, lambda w, n: Req(body={"month": "2025-06"})),
    ("POST", "/api/v1/prepaid"): Write(
        COMMERCIAL,
        lambda w, n: Req(
            body={"tenant": "tenant-a", "amount": f"{n}.00", "expires_at": "2027-06-30"}
        ),
    ),
    ("POST", "/api/v1/maintenance/"): Write(
        OPERATOR,
        lambda w, n: Req(
            body={"title": f"Window {n}", "starts_at": future(n), "ends_at": future(n + 1)}
        ),
        creates="metering.MaintenanceWindow",
    ),
    ("PATCH", "/api/v1/maintenance/{id}/"): Write(
        OPERATOR,
        lambda w, n: Req(params={"id": w.maintenance.pk}, body={"title": f"Firmware {n}"}),
    ),
    ("DELETE", "/api/v1/maintenance/{id}/"): Write(
        OPERATOR,
        lambda w, n: Req(
            params={
                "id": maintenance_window_create(
                    title="Spare",
                    starts_at=FUTURE + timedelta(hours=n),
                    ends_at=FUTURE + timedelta(hours=n + 1),
                    by=None,
                ).pk
            }
        ),
    ),
    ("POST", "/api/v1/telemetry/prometheus"): Write(
        OPERATOR,
        lambda w, n: Req(
            body=PROMETHEUS_TEXT,
            content_type="text/plain",
            query=f"kind=vllm&pool=h100-a&source=s{n}",
        ),
        scope="ingest",
    ),
    ("POST", "/api/v1/usage/cloudevents"): Write(
        OPERATOR,
        lambda w, n: Req(body=[_cloudevent(n)], content_type="application/cloudevents-batch+json"),
        scope="ingest",
    ),
    ("POST", "/api/v1/usage/events"): Write(
        OPERATOR, lambda w, n: Req(body=[_event(n)]), scope="ingest"
    ),
    ("POST", "/api/v1/usage/openai-batch"): Write(
        OPERATOR,
        lambda w, n: Req(
            body=_openai_line(n) + "\n", content_type="application/jsonl", query="tenant=tenant-a"
        ),
        scope="ingest",
    ),
    ("POST", "/api/v1/otlp/v1/traces"): Write(
        OPERATOR, lambda w, n: Req(body=_otlp_spans(n)), scope="ingest"
    ),
    ("POST", "/api/v1/otlp/v1/metrics"): Write(
        OPERATOR, lambda w, n: Req(body=_otlp_metrics(n)), scope="ingest"
    ),
    **_dated(
        "/api/v1/contracts/",
        COMMERCIAL,
        "billing.Contract",
        {"tenant": "tenant-a", "kind": "paid"},
        lambda w, at: contract_create(
            tenant=w.tenant_a, kind="paid", effective_from=at, currency="USD"
        ),
    ),
    **_dated(
        "/api/v1/cost-models/",
        OPERATOR,
        "flywheel.CostModel",
        COST_MODEL,
        lambda w, at: cost_model_create(
            pool=w.pool,
            capex_per_gpu=Decimal(1),
            depreciation_months=60,
            power_kw_per_gpu=Decimal(1),
            pue=Decimal(1),
            electricity_price_per_kwh=Decimal(0),
            hosting_per_gpu_month=Decimal(0),
            effective_from=at,
        ),
    ),
    **_dated(
        "/api/v1/factory-costs/",
        OPERATOR,
        "flywheel.FactoryCosts",
        {"staff_per_month": "1", "sga_per_month": "2"},
        lambda w, at: factory_costs_create(
            staff_per_month=Decimal(1), sga_per_month=Decimal(1), effective_from=at
        ),
    ),
    **_dated(
        "/api/v1/goals/",
        OPERATOR,
        "flywheel.Goal",
        {"min_tfi": "0.3"},
        lambda w, at: goal_create(min_tfi=Decimal("0.2"), effective_from=at),
    ),
    ("POST", "/api/v1/reservations/"): Write(
        COMMERCIAL,
        lambda w, n: Req(
            body={
                "tenant": "tenant-a",
                "deployment": w.deployment.slug,
                "gpus": 1,
                "hourly_rate": "2.40",
                "term": "1m",
                "starts_at": future(n),
            }
        ),
        creates="billing.Reservation",
    ),
    ("PATCH", "/api/v1/reservations/{id}/"): Write(
        COMMERCIAL,  # one GPU more than A's reservation ever holds (its GPUs only rise)
        lambda w, n: Req(
            params={"id": w.reservation_a.pk},
            body={
                "gpus": 1
                + max(v.gpus for v in Reservation.objects.get(pk=w.reservation_a.pk).gpus.all()),
                "effective_from": future(n),
            },
        ),
    ),
    ("POST", "/api/v1/reservations/{id}/cancel/"): Write(
        COMMERCIAL,  # each call ends A's reservation earlier than the one before could
        lambda w, n: Req(
            params={"id": w.reservation_a.pk},
            body={"at": (FUTURE - timedelta(hours=n)).isoformat().replace("+00:00", "Z")},
        ),
    ),
    **_dated(
        "/api/v1/service-tiers/",
        COMMERCIAL,
        "billing.ServiceTierMultiplier",
        {"tier": "priority", "multiplier": "1.6"},
        lambda w, at: service_tier_create(
            service_tier="flex", multiplier=Decimal("0.4"), effective_from=at
        ),
    ),
    **_dated(
        "/api/v1/prices/",
        COMMERCIAL,
        "billing.Price",
        {"model": "llama-70b", "token_class": "output", "per_million": "2.5", "currency": "USD"},
        lambda w, at: price_create(
            model=w.deployment.model,
            token_class="output",
            per_million=Decimal(3),
            currency="USD",
            effective_from=at,
        ),
    ),
    **_dated(
        "/api/v1/promotions/",
        COMMERCIAL,
        "billing.PromotionalCredit",
        {"tenant": "tenant-a", "amount": "5"},
        lambda w, at: promotion_grant(
            tenant=w.tenant_a, amount=Decimal(1), currency="USD", effective_from=at
        ),
    ),
    **_catalogue(
        "/api/v1/models/",
        "slug",
        "metering.ServedModel",
        post=lambda n: {"slug": f"new-model-{n}", "name": "New", "aliases": [f"a-{n}"]},
        spare=lambda w, n: _model(n).slug,
        put=lambda n: {"slug": f"model-{n}", "name": "Renamed", "aliases": []},
        existing=lambda w: "llama-70b",
        patch=lambda n: {"name": f"Llama {n}"},
    ),
    **_catalogue(
        "/api/v1/pools/",
        "slug",
        "metering.Pool",
        post=lambda n: {"slug": f"new-pool-{n}", "name": "P", "gpu_type": "B200", "gpu_count": 8},
        spare=lambda w, n: _pool(n).slug,
        put=lambda n: {"slug": f"pool-{n}", "name": "Renamed", "gpu_type": "H100", "gpu_count": 16},
        existing=lambda w: "h100-a",
        patch=lambda n: {"site": f"site {n}"},
    ),
    **_catalogue(
        "/api/v1/scrape-targets/",
        "id",
        "metering.ScrapeTarget",
        post=lambda n: {"url": f"http://127.0.0.1:9/new-{n}", "kind": "sglang", "pool": "h100-a"},
        spare=lambda w, n: _target(w, n).pk,
        put=lambda n: {"url": f"http://127.0.0.1:9/put-{n}", "kind": "dcgm", "pool": "h100-a"},
        existing=lambda w: w.scrape_target.pk,
        patch=lambda n: {"enabled": n % 2 == 0},
    ),
    **_catalogue(
        "/api/v1/tenants/",
        "slug",
        "portal.Tenant",
        post=lambda n: {"slug": f"new-tenant-{n}", "name": "New"},
        spare=lambda w, n: _tenant(n).slug,
        put=lambda n: {"slug": f"tenant-{n}", "name": "Renamed", "status": "active"},
        existing=lambda w: "tenant-a",
        patch=lambda n: {"name": f"A {n}"},
    ),
}


UNFINGERPRINTED = {"portal.ApiToken", "metering.IngestRejection"}
# Rows of a refused batch's usage.batch_rejected event (the operators are told of it, as the
# debugger keeps it): left out of their tables' digests, every other row kept.
REJECTED = "SELECT id FROM portal_event WHERE type = 'usage.batch_rejected'"
FINGERPRINT_WHERE = {
    "portal.Event": "t.type <> 'usage.batch_rejected'",
    "portal.Delivery": f"t.event_id NOT IN ({REJECTED})",
    "portal.DeliveryAttempt": (
        f"t.delivery_id NOT IN (SELECT id FROM portal_delivery WHERE event_id IN ({REJECTED}))"  # noqa: S608
    ),
    "portal.InboxRead": f"t.event_id NOT IN ({REJECTED})",
}


def database_fingerprint() -> dict[str, str]:
    """A digest of every row of the project's tables (PostgreSQL): equal fingerprints show
    that a refused request changed nothing. Token rows are left out: authenticating touches
    their last use; so is the ingestion debugger's record of refused batches, whose whole
    point is to keep that a batch was refused (never its payload), and the event telling the
    operators of it (FINGERPRINT_WHERE). One query: the tables' digests side by side."""
    labels, digests = [], []
    for model in apps.get_models():
        meta = model._meta
        if meta.app_label not in ("auth", "portal", "metering", "billing", "flywheel"):
            continue
        if meta.proxy or not meta.managed or meta.label in UNFINGERPRINTED:
            continue
        where = FINGERPRINT_WHERE.get(meta.label)
        labels.append(meta.label)
        digests.append(
            f"(SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "  # noqa: S608
            f'FROM "{meta.db_table}" t' + (f" WHERE {where}" if where else "") + ")"
        )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(digests)}")
        return dict(zip(labels, cursor.fetchone(), strict=True))
