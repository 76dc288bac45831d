"""The ingestion debugger (architecture.md "Ingestion"): refused batches and OTLP partial
successes kept 7 days without payload, each source's last batch, and the silent rule of
kpis.md section 3c."""

import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from metering.domain.usage.sources import SourceState, source_state
from metering.models import Deployment, EngineHourly, IngestRejection, SourceSeen
from metering.selectors.ingestion import source_list
from metering.tasks import retention_task
from portal import clock
from portal.periods import hour_floor
from portal.services import token_create
from tests.metering.factories import event, make_deployment

pytestmark = pytest.mark.both_backends


@pytest.fixture
def gateway(users, tenant_a):
    make_deployment()
    token, raw = token_create(user=users["operator"], name="gw", scopes=["ingest", "read"])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    api.token = token
    return api


def _post(api, items, path="/api/v1/usage/events"):
    return api.generic("POST", path, json.dumps(items), content_type="application/json")


def test_a_refused_batch_is_kept_without_its_payload_and_listed_for_operators(
    gateway, users, token_client, now
):
    items = [
        event(i, time=(now - timedelta(hours=1)).isoformat(), source="gw-eu") for i in range(12)
    ]
    for i in range(11):
        items[i + 1]["output_tokens"] = -1  # eleven bad events: ten errors kept, all counted
    assert _post(gateway, items).status_code == 400

    [kept] = IngestRejection.objects.all()
    assert (kept.path, kept.token_prefix, kept.source, kept.status, kept.received,
            kept.rejected) == ("/api/v1/usage/events", gateway.token.prefix, "gw-eu", 400, 12, 11)  # fmt: skip
    assert kept.errors[0] == {
        "index": 1, "field": "output_tokens", "message": "must be a non-negative integer",
    }  # fmt: skip
    assert len(kept.errors) == 10
    assert "ev-1" not in json.dumps(kept.errors)  # no payload

    listed = token_client(users["operator"]).get("/api/v1/usage/rejections").json()
    assert [(r["path"], r["rejected"], r["received"]) for r in listed["results"]] == [
        ("/api/v1/usage/events", 11, 12)
    ]
    for role in ("finance", "tenant"):
        client = token_client(users[role])
        assert client.get("/api/v1/usage/rejections").status_code == 403, role
    investor = APIClient()
    investor.force_login(users["investor"])  # investors hold no tokens: their session
    assert investor.get("/api/v1/usage/rejections").status_code == 403


def test_an_accepted_batch_leaves_no_rejection_and_updates_its_source(gateway, now):
    first = now - timedelta(hours=2)
    assert _post(gateway, [event(1, time=first.isoformat(), source="gw-eu")]).status_code == 200
    late = event(2, time=(first - timedelta(hours=5)).isoformat(), source="gw-eu")
    assert _post(gateway, [late]).status_code == 200  # an older event: the newest stays

    assert not IngestRejection.objects.exists()
    [row] = source_list(now=now)
    assert (row.source, row.deployments, row.last_event_at, row.last_received_at) == (
        "gw-eu", ["llama-70b@h100-a"], first, now,
    )  # fmt: skip
    assert row.state == SourceState.ACTIVE


def test_a_batch_from_two_sources_on_two_deployments_updates_each_pair_in_one_statement(
    gateway, now
):
    """Each (source, deployment) of a batch keeps its own newest event time, written by one
    statement for the batch, never one a row (`executemany`: in autocommit, a commit a
    row). On PostgreSQL that statement is the batch's storing statement."""
    make_deployment(model="qwen-32b", pool="h200-a")
    at = [now - timedelta(minutes=m) for m in (50, 40, 30, 20, 10)]
    items = [
        event(1, time=at[0].isoformat(), source="gw-eu"),
        event(2, time=at[3].isoformat(), source="gw-eu"),
        event(3, time=at[1].isoformat(), source="gw-eu", model="qwen-32b"),
        event(4, time=at[4].isoformat(), source="gw-us"),
        event(5, time=at[2].isoformat(), source="gw-us", model="qwen-32b"),
    ]
    with CaptureQueriesContext(connection) as statements:
        assert _post(gateway, items).status_code == 200
    upserts = [q["sql"] for q in statements.captured_queries if "metering_sourceseen" in q["sql"]]
    assert upserts
    assert not [sql for sql in upserts if re.match(r"\d+ times: ", sql)]  # no executemany
    seen = {
        (row.source, row.deployment.model.slug): row.last_event_at
        for row in SourceSeen.objects.select_related("deployment__model")
    }
    assert seen == {
        ("gw-eu", "llama-70b"): at[3],
        ("gw-eu", "qwen-32b"): at[1],
        ("gw-us", "llama-70b"): at[4],
        ("gw-us", "qwen-32b"): at[2],
    }


def test_a_quiet_source_is_silent_only_while_its_engines_keep_generating(gateway, now):
    assert _post(gateway, [event(1, time=now.isoformat(), source="gw-eu")]).status_code == 200
    later = now + timedelta(minutes=20)
    [row] = source_list(now=later)
    assert row.state == SourceState.IDLE  # quiet, and no engine counted anything since

    EngineHourly.objects.create(
        deployment=Deployment.objects.get(), hour=hour_floor(later), intervals=2,
        generation_tokens=50_000, last_observed_at=later - timedelta(minutes=1),
    )  # fmt: skip
    [row] = source_list(now=later)
    assert row.state == SourceState.SILENT
    [row] = source_list(now=now + timedelta(minutes=14))
    assert row.state == SourceState.ACTIVE  # under 15 minutes: not quiet yet
    [row] = source_list(now=now + timedelta(hours=25))
    assert row.state == SourceState.IDLE  # nothing for a day: no longer expected to send


@pytest.mark.parametrize(
    ("quiet_minutes", "engines_grew", "state"),
    [(14, True, "active"), (15, True, "silent"), (15, False, "idle"), (24 * 60 + 1, True, "idle")],
)
def test_source_state_boundaries(now, quiet_minutes, engines_grew, state):
    last = now - timedelta(minutes=quiet_minutes)
    assert source_state(last_received_at=last, now=now, engines_grew=engines_grew) == state


def test_the_retention_job_purges_rejections_older_than_seven_days(gateway, now):
    for age in (timedelta(days=8), timedelta(days=7, seconds=1), timedelta(days=6)):
        IngestRejection.objects.create(at=now - age, path="/x", status=400)
    retention_task()
    assert list(IngestRejection.objects.values_list("at", flat=True)) == [now - timedelta(days=6)]
    assert clock.now() == now


def test_a_refusal_naming_unstorable_text_is_kept_readable(db, now):
    """A fuzzed body may name a field with NUL or a lone surrogate: PostgreSQL refuses both in
    text and JSON, so the record keeps them replaced instead of failing the request."""
    from metering.services.usage.rejections import rejection_record

    record = rejection_record(
        at=now, path="/api/v1/usage/events", token_prefix="tf_abc", source="s\x00rc\ud99f",
        status=400, received=1,
        errors=[{"index": 0, "field": "in\x00put\ud99f", "message": "unknown field"}],
    )  # fmt: skip

    record.refresh_from_db()
    assert record.source == "s\ufffdrc?"
    assert record.errors == [{"index": 0, "field": "in\ufffdput?", "message": "unknown field"}]
