"""Schemathesis over every API operation, as every role: no 5xx, no response-schema violation.

Each operation of the schema /api/schema/ serves is fuzzed in-process through the WSGI
application, with the two-tenant world in the database, once per role (a bearer token
each: the operator's carries every scope, finance's and the member's `read`, and the
investor's is forced to every scope so the role alone must refuse), with positive and
negative (schema-violating) cases. Checks: `not_a_server_error` and
`response_schema_conformance`; a failure shows the server's traceback. No name is looked up
meanwhile (`no_lookups`): the webhook URLs the fuzz makes are never resolved nor reached.

Sizes: in `make test`, 2 positive and 2 negative cases per operation and role, as the operator
and one other role in turn: 8 per operation (124 operations today: about 1,000 requests),
derandomized so CI is reproducible. `make soak` (RELIABILITY_SOAK=1) runs every role, 1,000
cases per operation (125 per role and mode) with a random seed.
"""

import os
import socket
import traceback

import pytest
import schemathesis
from django.core.signals import got_request_exception, request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, Phase, given, settings
from rest_framework.test import APIClient
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from portal.wsgi import application
from tests.conftest import SOAK
from tests.reliability.operations import schema
from tests.reliability.world import ROLES, bearer

pytestmark = pytest.mark.postgres_only

# Cases per operation, role and generation mode (FUZZ_CASES overrides, for exploring).
FUZZ_CASES = int(os.environ.get("FUZZ_CASES", 0)) or (125 if SOAK else 2)
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
SCOPES = {
    "operator": ["read", "ingest", "admin", "notify"],
    "finance": ["read", "notify"],
    "investor": ["read", "ingest", "admin", "notify"],
    "tenant": ["read", "notify"],
}


@schemathesis.serializer("application/jsonl")
def _jsonl(ctx, value):
    """OpenAI batch output: the schema declares a string; send it as it is."""
    if value is None:
        return None
    return value.encode() if isinstance(value, str) else str(value).encode()


API = schemathesis.openapi.from_dict(schema())
API.app = application
OPERATIONS = {op.ok().label: op.ok() for op in API.get_all_operations()}


@pytest.fixture
def in_process_wsgi():
    """Keep the test's connection (and its transaction) across WSGI requests, as Django's
    test client does, and keep the traceback of every unhandled exception."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    tracebacks: list[str] = []

    def record(sender, request=None, **kwargs):
        tracebacks.append(traceback.format_exc())

    got_request_exception.connect(record, weak=False)
    try:
        yield tracebacks
    finally:
        got_request_exception.disconnect(record)
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_every_schema_operation_is_fuzzed():
    assert len(OPERATIONS) == sum(
        1 for item in schema()["paths"].values() for m in item if m != "parameters"
    )


def _fuzz(operation, *, role: str, mode: GenerationMode, headers: dict, tracebacks: list):
    """Run FUZZ_CASES cases of `operation` as `role`; returns the failures described."""
    failures: list[str] = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=FUZZ_CASES,
        deadline=None,
        database=None,
        derandomize=not SOAK,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],
    )
    def fuzz(case):
        seen = len(tracebacks)
        response = case.call(app=application, headers=headers)
        try:
            case.validate_response(
                response, checks=[not_a_server_error, response_schema_conformance]
            )
        except (Exception, FailureGroup) as exc:
            server = "".join(tracebacks[seen:])[-3000:]
            failures.append(f"[{role}, {mode.value}] {exc}\n{server}")

    fuzz()
    return failures


@pytest.fixture
def no_lookups(monkeypatch):
    """Webhook URLs are fuzzed too, never looked up nor reached: the system's resolver answers
    loopback (the test's PostgreSQL and Redis) and nothing else, so an endpoint the fuzz
    creates resolves nowhere (portal.webhooks checks the addresses a host resolves to)."""
    resolve = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):
        if host in ("127.0.0.1", "::1", "localhost"):
            return resolve(host, *args, **kwargs)
        raise socket.gaierror(socket.EAI_NONAME, "no lookups while fuzzing")

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)


def _roles_of(label: str) -> tuple[str, ...]:
    """Every role in `make soak`; in `make test` the operator (every write's positive cases)
    and one other role in turn, operation by operation (each reads some 40 operations)."""
    if SOAK:
        return ROLES
    others = [role for role in ROLES if role != "operator"]
    return ("operator", others[sorted(OPERATIONS).index(label) % len(others)])


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_operation_has_no_server_error_or_schema_violation(
    world, in_process_wsgi, no_lookups, label
):
    operation = OPERATIONS[label]
    failures: list[str] = []
    for role in _roles_of(label):
        headers = {"Authorization": f"Bearer {bearer(world.users[role], SCOPES[role])}"}
        for mode in MODES:
            failures += _fuzz(
                operation, role=role, mode=mode, headers=headers, tracebacks=in_process_wsgi
            )
    assert not failures, f"{len(failures)} failing cases; first:\n" + "\n".join(failures[:3])


# The corpus of the hardening round's classes, sent to every operation and page that takes
# the parameter, as every role: periods and months outside the portal's years or
# impossible, ratios that underflow or overflow, bounds that are not dates. None may be a
# 5xx; under /api/ every refusal is JSON naming the parameter.
HOSTILE = {
    "period": ["0000-01", "0000-Q1", "9999-12", "2026-13", "2026-Q5", "1999-12", "2026-1",
               "-2026-01", "2026-00", "x" * 300],
    "month": ["0000-01", "9999-12", "2101-01", "2026-00", "2026-13", "0-1", "2026-1"],
    "baseline_tef": ["1e-300", "0", "-1", "1.01", "1e309", "NaN", "inf", "", "0x1"],
    "from": ["0000-01-01", "0001-01-01T00:00:00+01:00", "9999-12-31", "2026-02-30",
             "2026-03-01T00:30:00Z"],
    "to": ["0000-01-01", "9999-12-31T23:00:00Z", "2026-02-30"],
    "as_of": ["0000-01-01", "9999-12-31", "2026-02-30", "yesterday"],
}  # fmt: skip


def _query_operations() -> list[tuple[str, str]]:
    """(path, parameter) of every GET operation without path parameters taking one of the
    HOSTILE parameters in its query."""
    found = []
    for path, item in schema()["paths"].items():
        get = item.get("get")
        if get is None or "{" in path:
            continue
        names = {p["name"] for p in get.get("parameters", []) if p.get("in") == "query"}
        found += [(path, name) for name in sorted(names & set(HOSTILE))]
    return found


QUERY_OPERATIONS = _query_operations()
PERIOD_PAGES = ["/", "/usage/", "/investor/", "/flywheel/", "/billing/sla/", "/billing/close/",
                "/billing/receivables/", "/billing/realization/", "/reports/tfom/",
                "/metering/", "/cockpit/"]  # fmt: skip


def test_the_hostile_corpus_reaches_the_period_month_and_ratio_parameters():
    names = {name for _, name in QUERY_OPERATIONS}
    assert {"period", "month", "baseline_tef", "from", "to", "as_of"} <= names, names


@pytest.mark.parametrize(
    ("path", "name"), QUERY_OPERATIONS, ids=[f"{p}?{n}" for p, n in QUERY_OPERATIONS]
)
def test_hostile_query_values_are_a_json_4xx_naming_the_parameter(world, path, name):
    failures = []
    for role in ROLES:
        client = APIClient()
        token = bearer(world.users[role], SCOPES[role])
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        for value in HOSTILE[name]:
            response = client.get(path, {name: value})
            if response.status_code >= 500 or response["Content-Type"] != "application/json":
                failures.append((role, value, response.status_code, response.content[:200]))
            elif response.status_code == 400:
                fields = {e["field"] for e in response.json()["errors"]}
                if not fields & {name, "period"}:
                    failures.append((role, value, 400, fields))
    assert not failures, failures


@pytest.mark.parametrize("path", PERIOD_PAGES)
def test_hostile_period_values_on_pages_are_never_a_server_error(world, path):
    """Every value of the corpus on every page; in `make test` each value as one role in
    turn (every role reads each page some ten times), in `make soak` as every role."""
    clients = {}
    for role in ROLES:
        clients[role] = Client()
        clients[role].force_login(world.users[role])
    cases = [(name, value) for name in ("period", "month", "baseline_tef", "from", "to", "as_of")
             for value in HOSTILE[name]]  # fmt: skip
    failures = []
    for index, (name, value) in enumerate(cases):
        for role in ROLES if SOAK else [ROLES[index % len(ROLES)]]:
            response = clients[role].get(path, {name: value})
            if response.status_code >= 500:
                failures.append((role, name, value, response.status_code))
    assert not failures, failures


PROMETHEUS_VALUES = ["9223372036854775807", "9223372036854775808", "1e19", "1e308", "1e309",
                     "-1", "NaN", "+Inf", "-Inf", "0x10", "1_000", "", "1e-400"]  # fmt: skip


def test_hostile_metric_values_are_never_a_server_error(world):
    """Every value twice (a counter's second push is an increase) in a counter, a gauge
    and a histogram; OpenMetrics too: skipped and listed, or refused, never a 5xx."""
    client = APIClient()
    token = bearer(world.users["operator"], SCOPES["operator"])
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    path = "/api/v1/telemetry/prometheus?kind=vllm&pool=h100-a"
    failures = []
    for value in PROMETHEUS_VALUES:
        for suffix in ("", "# EOF\n"):
            text = (
                "# TYPE vllm:prompt_tokens_total counter\n"
                f'vllm:prompt_tokens_total{{model_name="llama-70b"}} {value}\n'
                "# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{model_name="llama-70b"}} {value}\n'
                "# TYPE vllm:e2e_request_latency_seconds histogram\n"
                f'vllm:e2e_request_latency_seconds_bucket{{model_name="llama-70b",le="+Inf"}} {value}\n'
                f'vllm:e2e_request_latency_seconds_count{{model_name="llama-70b"}} {value}\n'
                f'vllm:e2e_request_latency_seconds_sum{{model_name="llama-70b"}} {value}\n' + suffix
            )
            for _ in range(2):
                response = client.generic("POST", path, text, content_type="text/plain")
                if response.status_code >= 500:
                    failures.append((value, suffix, response.status_code, response.content[:200]))
    assert not failures, failures
