"""window_resolve reads how far usage is folded, the published cut and the factory's first
day in service in one statement (portal.pipeline.columns_read); the window it resolves is
the one the separate reads give (usage_metered_until, usage_measured_until,
factory_in_service_from), whatever state the pipeline is in.

The world: now is 16 December 2026 10:23:45 UTC; pool p1 (10 GPUs) has no stored start.
States read: nothing sent yet (no fold mark, no cut, no pool in service); tenant-a's 500
output tokens at 09:30 and 700 at 10:05 on the 16th sent, folded, rated and measured (p1 in
service from its first sign of life, 09:00; a cut published); a later event of 10:20 accepted
but not folded (waiting since its receipt); and p1 given a stored start, 1 December."""

from datetime import UTC, datetime

import pytest
from django.db import transaction

from metering.selectors.factory import factory_in_service_from
from metering.selectors.usage import usage_measured_until, usage_metered_until, window_resolve
from portal.periods import period_resolve
from tests.flywheel.factories import api_post, llama_on_p1

pytestmark = pytest.mark.both_backends

NOW = datetime(2026, 12, 16, 10, 23, 45, tzinfo=UTC)
PARAMS = [
    {},
    {"period": "last_30_days"},
    {"period": "last_7_days"},
    {"from": "2026-12-01", "to": "2026-12-16"},
]


def _event(event_id: str, at: str, output: int) -> dict:
    return {"id": event_id, "time": at, "tenant": "tenant-a", "model": "llama-70b",
            "input_tokens": 0, "output_tokens": output}  # fmt: skip


def _separately(params) -> tuple:
    """The window as the separate reads resolve it."""
    metered = usage_metered_until(now=NOW)
    window = period_resolve(
        params, now=NOW, default="this_month", data_until=metered,
        measured_until=usage_measured_until(now=NOW, metered=metered),
        data_from=factory_in_service_from(),
    )  # fmt: skip
    return _fields(window)


def _fields(window) -> tuple:
    return (window.start, window.end, window.to, window.data_until, window.data_from, window.key)


def _same_windows() -> list[tuple]:
    windows = []
    for params in PARAMS:
        with transaction.atomic():  # as a GET's read snapshot would
            read = _fields(window_resolve(params, now=NOW))
        assert read == _separately(params), params
        windows.append(read)
    return windows


@pytest.mark.parametrize("now", [NOW], indirect=True)
def test_one_read_resolves_the_window_of_the_separate_reads(
    users, token_client, tenant_a, django_capture_on_commit_callbacks, now
):
    api = token_client(users["operator"], scopes=["ingest", "read", "admin"])
    llama_on_p1(api)
    api_post(api, "/api/v1/contracts", {"tenant": "tenant-a", "kind": "paid",
                                        "effective_from": "2026-01-01T00:00:00Z"})  # fmt: skip
    empty = _same_windows()
    assert empty[0][4] is None  # no pool in service yet

    with django_capture_on_commit_callbacks(execute=True):  # the stages run
        api_post(api, "/api/v1/usage/events", [
            _event("a1", "2026-12-16T09:30:00Z", 500), _event("a2", "2026-12-16T10:05:00Z", 700),
        ])  # fmt: skip
    folded = _same_windows()
    assert folded[0][4] == datetime(2026, 12, 16, 9, tzinfo=UTC)  # p1's first sign of life

    api_post(api, "/api/v1/usage/events", [_event("a3", "2026-12-16T10:20:00Z", 300)])
    waiting = _same_windows()  # accepted, not folded: usage is metered until its receipt
    assert waiting[0][3] == NOW

    stored = api.patch("/api/v1/pools/p1", {"in_service_from": "2026-12-01T00:00:00Z"},
                       format="json")  # fmt: skip
    assert stored.status_code == 200, stored.json()
    assert _same_windows()[0][4] == datetime(2026, 12, 1, tzinfo=UTC)
