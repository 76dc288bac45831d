"""Schemathesis over every API operation, as every role: no 5xx, no response-schema violation.

Each operation of the schema /api/schema/ serves is fuzzed in-process through the WSGI
application, with the two-tenant world in the database, once per role (a bearer token
each: the operator's carries every scope, finance's and the member's `read`, and the
investor's is forced to every scope so the role alone must refuse), with positive and
negative (schema-violating) cases. Checks: `not_a_server_error` and
`response_schema_conformance`; a failure shows the server's traceback.

Sizes: in `make test`, 6 positive and 6 negative cases per operation and role, 48 per
operation (92 operations today: about 4,400 requests), derandomized so CI is reproducible;
about 75 s on the 2-core machine. `make soak` (RELIABILITY_SOAK=1) runs 1,000 cases per
operation (125 per role and mode) with a random seed.
"""

import os
import traceback

import pytest
import schemathesis
from django.core.signals import got_request_exception, request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from portal.wsgi import application
from tests.reliability.operations import schema
from tests.reliability.world import ROLES, bearer

pytestmark = pytest.mark.postgres_only

SOAK = os.environ.get("RELIABILITY_SOAK") == "1"
# Cases per operation, role and generation mode (FUZZ_CASES overrides, for exploring).
FUZZ_CASES = int(os.environ.get("FUZZ_CASES", 0)) or (125 if SOAK else 6)
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
SCOPES = {
    "operator": ["read", "ingest", "admin"],
    "finance": ["read"],
    "investor": ["read", "ingest", "admin"],
    "tenant": ["read"],
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


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_operation_has_no_server_error_or_schema_violation(world, in_process_wsgi, label):
    operation = OPERATIONS[label]
    failures: list[str] = []
    for role in ROLES:
        headers = {"Authorization": f"Bearer {bearer(world.users[role], SCOPES[role])}"}
        for mode in MODES:
            failures += _fuzz(
                operation, role=role, mode=mode, headers=headers, tracebacks=in_process_wsgi
            )
    assert not failures, f"{len(failures)} failing cases; first:\n" + "\n".join(failures[:3])
