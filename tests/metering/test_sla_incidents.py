"""Incidents and maintenance: lifecycle services, the API, the operator's board and the
public status page."""

import io
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from metering.models import Incident, IncidentUpdate, MaintenanceWindow, Pool
from metering.selectors.sla.incidents import current_impact, timeline_of
from metering.selectors.sla.status import status_overview
from metering.services.sla.incidents import incident_create, incident_edit, incident_update_add
from metering.services.sla.maintenance import maintenance_window_create, maintenance_window_edit
from portal import clock
from portal.closing import month_close
from portal.models import AuditEntry
from tests.metering.factories import make_deployment, make_hourly_usage

T0 = datetime(2026, 4, 10, 12, tzinfo=UTC)


SERVED_SINCE = datetime(2025, 1, 1, tzinfo=UTC)  # in service all the days the pages show


def _served(deployment):
    Pool.objects.filter(pk=deployment.pool_id).update(in_service_from=SERVED_SINCE)
    return deployment


@pytest.fixture
def llama(db):
    return _served(make_deployment(model="llama-70b", pool="h100-a"))


@pytest.fixture
def qwen(db):
    return _served(make_deployment(model="qwen-32b", pool="h200-a"))


@pytest.fixture
def operator_api(users, token_client):
    return token_client(users["operator"], scopes=["admin", "read"])


def _open(**extra):
    values = {
        "title": "Llama down",
        "severity": "sev1",
        "impact": "major_outage",
        "started_at": T0,
        "by": None,
        "now": T0,
    }
    values.update(extra)
    return incident_create(**values)


# ---------------------------------------------------------------- services


def test_incident_create_posts_the_opening_update_at_the_start(llama):
    incident = _open(
        deployments=[llama], message="Investigating 503s.", now=T0 + timedelta(minutes=7)
    )

    update = incident.updates.get()
    assert (update.time, update.status, update.impact, update.message) == (
        T0,
        "investigating",
        "",
        "Investigating 503s.",
    )
    assert incident.status == "investigating" and incident.resolved_at is None
    assert AuditEntry.objects.get(object_type="incident", action="create").after["title"] == (
        "Llama down"
    )


def test_incident_create_of_a_past_incident_resolves_it(llama):
    incident = _open(resolved_at=T0 + timedelta(minutes=40), now=T0 + timedelta(days=1))

    assert incident.status == "resolved"
    assert incident.resolved_at == T0 + timedelta(minutes=40)
    assert list(incident.updates.values_list("status", "time")) == [
        ("investigating", T0),
        ("resolved", T0 + timedelta(minutes=40)),
    ]


def test_incident_create_refuses_a_future_start_and_an_early_resolution(llama):
    with pytest.raises(ValidationError) as error:
        _open(started_at=T0 + timedelta(minutes=6), resolved_at=T0, now=T0)

    assert error.value.message_dict == {
        "started_at": ["must not be in the future"],
        "resolved_at": ["must not precede started_at"],
    }
    assert not Incident.objects.exists()


def test_incident_update_add_walks_the_lifecycle_and_resolves(llama):
    incident = _open()
    for minutes, status in ((10, "identified"), (25, "monitoring"), (40, "resolved")):
        incident_update_add(
            incident=incident,
            status=status,
            message=status,
            time=T0 + timedelta(minutes=minutes),
            by=None,
            now=T0 + timedelta(hours=1),
        )

    incident.refresh_from_db()
    assert incident.status == "resolved"
    assert incident.resolved_at == T0 + timedelta(minutes=40)
    assert incident.updates.count() == 4


def test_incident_update_add_refuses_going_back_and_changes_nothing(llama):
    incident = _open()
    incident_update_add(incident=incident, status="monitoring", by=None, now=T0)

    with pytest.raises(ValidationError) as error:
        incident_update_add(incident=incident, status="identified", by=None, now=T0)

    assert "cannot go back from monitoring to identified" in error.value.message_dict["status"][0]
    incident.refresh_from_db()
    assert incident.status == "monitoring"
    assert incident.updates.count() == 2


def test_incident_update_add_refuses_a_time_before_the_latest_update(llama):
    incident = _open()
    incident_update_add(
        incident=incident,
        status="identified",
        time=T0 + timedelta(minutes=30),
        by=None,
        now=T0 + timedelta(hours=1),
    )

    with pytest.raises(ValidationError) as error:
        incident_update_add(
            incident=incident,
            status="monitoring",
            time=T0 + timedelta(minutes=20),
            by=None,
            now=T0 + timedelta(hours=1),
        )

    assert error.value.message_dict["time"] == [
        "must not precede the latest update (2026-04-10 12:30:00 UTC)"
    ]


def test_incident_impact_changes_only_from_the_update_on(llama):
    incident = _open(impact="degraded")
    incident_update_add(
        incident=incident,
        status="identified",
        impact="major_outage",
        time=T0 + timedelta(hours=1),
        by=None,
        now=T0 + timedelta(hours=1),
    )
    incident = Incident.objects.prefetch_related("updates").get(pk=incident.pk)

    assert incident.impact == "degraded"  # the opening impact stays
    assert current_impact(incident) == "major_outage"
    assert timeline_of(incident).segments(until=T0 + timedelta(hours=2)) == [
        (T0, T0 + timedelta(hours=1), "degraded"),
        (T0 + timedelta(hours=1), T0 + timedelta(hours=2), "major_outage"),
    ]


def test_incident_edit_corrects_the_record_and_moves_the_resolution(llama, qwen):
    incident = _open(
        deployments=[llama], resolved_at=T0 + timedelta(minutes=40), now=T0 + timedelta(days=1)
    )

    incident_edit(
        incident=incident,
        title="Llama and Qwen down",
        deployments=[llama, qwen],
        started_at=T0 - timedelta(minutes=5),
        resolved_at=T0 + timedelta(minutes=43),
        cause="A switch failed.",
        by=None,
        now=T0 + timedelta(days=1),
    )

    incident.refresh_from_db()
    assert incident.title == "Llama and Qwen down"
    assert incident.started_at == T0 - timedelta(minutes=5)
    assert incident.resolved_at == T0 + timedelta(minutes=43)
    assert sorted(d.slug for d in incident.deployments.all()) == [
        "llama-70b@h100-a",
        "qwen-32b@h200-a",
    ]
    assert list(incident.updates.values_list("time", flat=True)) == [
        T0 - timedelta(minutes=5),
        T0 + timedelta(minutes=43),
    ]
    entry = AuditEntry.objects.get(object_type="incident", action="update")
    assert (entry.before["cause"], entry.after["cause"]) == ("", "A switch failed.")


def test_incident_edit_refuses_resolving_by_correction(llama):
    incident = _open()

    with pytest.raises(ValidationError) as error:
        incident_edit(
            incident=incident,
            resolved_at=T0 + timedelta(minutes=1),
            by=None,
            now=T0 + timedelta(hours=1),
        )

    assert error.value.message_dict == {
        "resolved_at": ['resolve an open incident by posting an update with status "resolved"']
    }
    incident.refresh_from_db()
    assert incident.resolved_at is None


def test_maintenance_must_be_announced_before_it_starts(llama):
    with pytest.raises(ValidationError) as error:
        maintenance_window_create(
            title="Too late", starts_at=T0, ends_at=T0 + timedelta(hours=1), by=None, now=T0
        )

    assert error.value.message_dict == {
        "starts_at": ["must be in the future: maintenance is announced in advance"]
    }
    assert not MaintenanceWindow.objects.exists()


def test_maintenance_cannot_change_once_started(llama):
    window = maintenance_window_create(
        title="Upgrade",
        starts_at=T0,
        ends_at=T0 + timedelta(hours=2),
        deployments=[llama],
        by=None,
        now=T0 - timedelta(days=2),
    )

    with pytest.raises(ValidationError) as error:
        maintenance_window_edit(
            window=window, ends_at=T0 + timedelta(hours=5), by=None, now=T0 + timedelta(minutes=1)
        )

    assert error.value.message_dict == {
        "starts_at": ["this maintenance has started: it can no longer change"]
    }
    window.refresh_from_db()
    assert window.ends_at == T0 + timedelta(hours=2)
    assert window.announced_at == T0 - timedelta(days=2)


CLOSED = (
    "2026-04 is closed: its invoices are issued, so nothing may take effect inside it "
    "(correct it with a credit note)"
)


def test_maintenance_of_the_past_is_imported_with_the_announced_at_it_had(llama):
    window = maintenance_window_create(
        title="Driver upgrade",
        starts_at=T0,
        ends_at=T0 + timedelta(hours=2),
        announced_at=T0 - timedelta(days=3),
        deployments=[llama],
        by=None,
        now=T0 + timedelta(days=20),
    )

    window.refresh_from_db()
    assert (window.announced_at, window.starts_at) == (T0 - timedelta(days=3), T0)


@pytest.mark.parametrize(
    ("announced_at", "message"),
    [
        (T0, "must be before starts_at: a window counts only when announced before it starts"),
        (T0 + timedelta(minutes=1), "must be before starts_at: a window counts only when "
         "announced before it starts"),
        (T0 + timedelta(days=21), "must not be in the future"),
    ],
)  # fmt: skip
def test_maintenance_announced_at_is_before_it_starts_and_not_in_the_future(
    llama, announced_at, message
):
    with pytest.raises(ValidationError) as error:
        maintenance_window_create(
            title="Driver upgrade",
            starts_at=T0,
            ends_at=T0 + timedelta(hours=2),
            announced_at=announced_at,
            by=None,
            now=T0 + timedelta(days=20),
        )

    assert error.value.message_dict == {"announced_at": [message]}
    assert not MaintenanceWindow.objects.exists()


def test_maintenance_starting_in_a_closed_month_is_refused_naming_starts_at(llama):
    month_close(month=T0)
    audited = AuditEntry.objects.count()

    with pytest.raises(ValidationError) as error:
        maintenance_window_create(
            title="Driver upgrade",
            starts_at=T0,
            ends_at=T0 + timedelta(hours=2),
            announced_at=T0 - timedelta(days=3),
            by=None,
            now=T0 + timedelta(days=40),
        )

    assert error.value.message_dict == {"starts_at": [CLOSED]}
    assert not MaintenanceWindow.objects.exists()
    assert AuditEntry.objects.count() == audited


def test_incident_starting_in_a_closed_month_is_refused_naming_started_at(llama):
    month_close(month=T0)

    with pytest.raises(ValidationError) as error:
        _open(resolved_at=T0 + timedelta(hours=1), now=T0 + timedelta(days=40))

    assert error.value.message_dict == {"started_at": [CLOSED]}
    assert not Incident.objects.exists()
    assert not IncidentUpdate.objects.exists()


def test_incident_moved_into_a_closed_month_is_refused_naming_started_at(llama):
    month_close(month=T0)
    incident = _open(started_at=datetime(2026, 5, 1, 1, tzinfo=UTC), now=T0 + timedelta(days=40))

    with pytest.raises(ValidationError) as error:
        incident_edit(incident=incident, started_at=T0, by=None, now=T0 + timedelta(days=40))

    assert error.value.message_dict == {"started_at": [CLOSED]}
    incident.refresh_from_db()
    assert incident.started_at == datetime(2026, 5, 1, 1, tzinfo=UTC)
    assert list(incident.updates.values_list("time", flat=True)) == [incident.started_at]


# ---------------------------------------------------------------- API


def test_api_incident_lifecycle_two_updates_and_resolution(operator_api, llama, qwen):
    started = clock.now() - timedelta(minutes=30)
    response = operator_api.post(
        "/api/v1/incidents",
        {
            "title": "Llama 503s",
            "severity": "sev2",
            "impact": "partial_outage",
            "deployments": ["llama-70b@h100-a"],
            "started_at": started.isoformat(),
            "message": "Investigating.",
        },
    )
    assert response.status_code == 201, response.json()
    created = response.json()
    assert (created["status"], created["impact"], created["current_impact"]) == (
        "investigating",
        "partial_outage",
        "partial_outage",
    )
    assert (created["deployments"], created["pools"], created["tenants"]) == (
        ["llama-70b@h100-a"],
        [],
        [],
    )
    assert created["models"] == ["llama-70b"]
    url = f"/api/v1/incidents/{created['id']}/updates"

    first = operator_api.post(
        url, {"status": "identified", "impact": "major_outage", "message": "Bad node."}
    )
    second = operator_api.post(url, {"status": "monitoring", "impact": None, "message": "Drained."})
    done = operator_api.post(url, {"status": "resolved", "message": "Fixed."})

    assert [r.status_code for r in (first, second, done)] == [201, 201, 201]
    body = done.json()
    assert body["status"] == "resolved"
    assert body["current_impact"] == "major_outage"
    assert body["resolved_at"] == body["updates"][-1]["time"]
    assert [(u["status"], u["impact"]) for u in body["updates"]] == [
        ("investigating", None),
        ("identified", "major_outage"),
        ("monitoring", None),
        ("resolved", None),
    ]
    assert AuditEntry.objects.filter(object_type="incident").count() == 4


def test_api_incident_errors_are_listed_by_field(operator_api, llama):
    response = operator_api.post(
        "/api/v1/incidents",
        {"title": "", "severity": "sev9", "impact": "major_outage", "deployments": ["nope"]},
    )

    assert response.status_code == 400
    fields = {e["field"] for e in response.json()["errors"]}
    assert fields == {"title", "severity", "deployments", "started_at"}
    assert not Incident.objects.exists()


def test_api_patch_corrects_but_refuses_status(operator_api, llama):
    incident = _open(now=clock.now())
    url = f"/api/v1/incidents/{incident.pk}"

    refused = operator_api.patch(url, {"status": "resolved"})
    fixed = operator_api.patch(url, {"title": "Renamed", "remediation": "Runbook."})

    assert refused.status_code == 400
    assert refused.json()["errors"] == [
        {
            "field": "status",
            "message": "changes by posting an update to /api/v1/incidents/<id>/updates",
        }
    ]
    assert fixed.status_code == 200
    assert (fixed.json()["title"], fixed.json()["remediation"]) == ("Renamed", "Runbook.")
    assert operator_api.put(url, {"title": "x"}).status_code == 405


def test_api_going_back_is_a_400_naming_status(operator_api, llama):
    incident = _open(now=clock.now())
    url = f"/api/v1/incidents/{incident.pk}/updates"
    operator_api.post(url, {"status": "monitoring"})

    response = operator_api.post(url, {"status": "investigating"})

    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "status"
    assert IncidentUpdate.objects.filter(incident=incident).count() == 2


def test_api_read_token_cannot_open_an_incident(users, token_client, llama):
    api = token_client(users["operator"], scopes=["read"])

    response = api.post(
        "/api/v1/incidents",
        {"title": "x", "severity": "sev1", "impact": "degraded", "started_at": T0.isoformat()},
    )

    assert response.status_code == 403
    assert not Incident.objects.exists()


def test_api_tenant_member_sees_only_incidents_that_touched_them(
    users, token_client, tenant_a, tenant_b, llama, qwen
):
    make_hourly_usage(tenant_a, llama, T0 - timedelta(days=2), requests=3)
    on_llama = _open(title="On llama", deployments=[llama])
    _open(title="On qwen", deployments=[qwen])
    named = _open(title="Named", tenants=[tenant_a, tenant_b])
    _open(title="Only B", tenants=[tenant_b])
    api = token_client(users["tenant"])

    listing = api.get("/api/v1/incidents").json()

    assert [r["title"] for r in listing["results"]] == [
        "Named",
        "On llama",
    ]  # same start: by id desc
    assert next(r for r in listing["results"] if r["id"] == named.pk)["tenants"] == ["tenant-a"]
    assert api.get(f"/api/v1/incidents/{on_llama.pk}").status_code == 200
    hidden = Incident.objects.get(title="Only B")
    assert api.get(f"/api/v1/incidents/{hidden.pk}").status_code == 404
    assert api.get("/api/v1/incidents?tenant=tenant-b").status_code == 404


def test_api_operator_filters_by_tenant_status_and_period(operator_api, tenant_a, llama, qwen):
    make_hourly_usage(tenant_a, qwen, T0, requests=1)
    make_hourly_usage(tenant_a, qwen, T0 - timedelta(days=25), requests=1)
    resolved = _open(
        title="Old",
        deployments=[qwen],
        started_at=T0 - timedelta(days=20),
        resolved_at=T0 - timedelta(days=19),
    )
    current = _open(title="Now", deployments=[qwen])
    _open(title="Llama", deployments=[llama])

    def titles(query):
        return [
            r["title"] for r in operator_api.get(f"/api/v1/incidents?{query}").json()["results"]
        ]

    assert titles("tenant=tenant-a") == ["Now", "Old"]
    assert titles("status=open&tenant=tenant-a") == ["Now"]
    assert titles("status=resolved") == ["Old"]
    assert titles("from=2026-04-01&to=2026-04-05") == []
    assert titles("from=2026-03-21&to=2026-03-22") == ["Old"]
    assert operator_api.get("/api/v1/incidents?status=closed").status_code == 400
    assert {resolved.pk, current.pk} <= set(Incident.objects.values_list("pk", flat=True))


def test_api_incident_list_queries_do_not_grow(operator_api, llama, django_assert_num_queries):
    _open(deployments=[llama])
    operator_api.get("/api/v1/incidents")  # the token's last use is stamped once
    with CaptureQueriesContext(connection) as captured:
        operator_api.get("/api/v1/incidents")
    for n in range(5):
        incident = _open(title=f"More {n}", deployments=[llama])
        incident_update_add(incident=incident, status="identified", by=None, now=T0)

    with django_assert_num_queries(len(captured)):
        response = operator_api.get("/api/v1/incidents")

    assert response.json()["count"] == 6


def test_api_maintenance_announce_change_and_cancel(operator_api, llama):
    starts = (clock.now() + timedelta(days=3)).replace(microsecond=0)
    response = operator_api.post(
        "/api/v1/maintenance",
        {
            "title": "Driver upgrade",
            "deployments": ["llama-70b@h100-a"],
            "starts_at": starts.isoformat(),
            "ends_at": (starts + timedelta(hours=2)).isoformat(),
        },
    )
    assert response.status_code == 201, response.json()
    window = response.json()
    url = f"/api/v1/maintenance/{window['id']}"

    moved = operator_api.patch(url, {"ends_at": (starts + timedelta(hours=3)).isoformat()})
    late = operator_api.post(
        "/api/v1/maintenance",
        {"title": "Now", "starts_at": clock.now().isoformat(), "ends_at": starts.isoformat()},
    )
    listed = operator_api.get("/api/v1/maintenance?upcoming=true").json()
    cancelled = operator_api.delete(url)

    assert moved.status_code == 200
    assert moved.json()["ends_at"].startswith(f"{starts + timedelta(hours=3):%Y-%m-%dT%H:%M}")
    assert late.status_code == 400
    assert late.json()["errors"] == [
        {
            "field": "starts_at",
            "message": "must be in the future: maintenance is announced in advance",
        }
    ]
    assert [w["title"] for w in listed["results"]] == ["Driver upgrade"]
    assert cancelled.status_code == 204
    assert not MaintenanceWindow.objects.exists()
    assert AuditEntry.objects.filter(object_type="maintenance_window").count() == 3


def test_api_maintenance_announced_at_defaults_to_now_or_imports_a_past_window(operator_api, llama):
    now = clock.now()
    body = {"title": "Driver upgrade", "deployments": ["llama-70b@h100-a"]}
    ahead = operator_api.post(
        "/api/v1/maintenance",
        {**body, "starts_at": "2026-12-20T02:00:00Z", "ends_at": "2026-12-20T04:00:00Z"},
    )
    past = operator_api.post(
        "/api/v1/maintenance",
        {
            **body,
            "starts_at": "2026-12-02T02:00:00Z",
            "ends_at": "2026-12-02T04:00:00Z",
            "announced_at": "2026-11-25T09:00:00Z",
        },
    )

    assert ahead.status_code == 201, ahead.json()
    assert ahead.json()["announced_at"] == now.isoformat().replace("+00:00", "Z")
    assert past.status_code == 201, past.json()
    assert past.json()["announced_at"] == "2026-11-25T09:00:00Z"
    assert MaintenanceWindow.objects.count() == 2


def test_api_maintenance_and_incident_in_a_closed_month_are_400s_naming_the_field(
    operator_api, llama
):
    month_close(month=datetime(2026, 11, 1, tzinfo=UTC))
    closed = (
        "2026-11 is closed: its invoices are issued, so nothing may take effect inside it "
        "(correct it with a credit note)"
    )

    window = operator_api.post(
        "/api/v1/maintenance",
        {
            "title": "Driver upgrade",
            "starts_at": "2026-11-30T22:00:00Z",
            "ends_at": "2026-12-01T02:00:00Z",
            "announced_at": "2026-11-25T09:00:00Z",
        },
    )
    incident = operator_api.post(
        "/api/v1/incidents",
        {
            "title": "Llama down",
            "severity": "sev1",
            "impact": "major_outage",
            "started_at": "2026-11-30T23:00:00Z",
            "resolved_at": "2026-12-01T01:00:00Z",
        },
    )

    assert window.status_code == 400
    assert window.json()["errors"] == [{"field": "starts_at", "message": closed}]
    assert incident.status_code == 400
    assert incident.json()["errors"] == [{"field": "started_at", "message": closed}]
    assert not MaintenanceWindow.objects.exists()
    assert not Incident.objects.exists()
    assert not AuditEntry.objects.filter(object_type__in=["incident", "maintenance_window"])


def test_a_closed_month_is_not_changed_by_a_record_spanning_it_or_an_edit_of_one_inside(
    operator_api, llama, tenant_a
):
    """An incident left open from before a closed month, or a window spanning it, would
    change its uptime: refused naming the start; an incident inside it keeps its impact,
    scope and times, while its cause and remediation stay editable."""
    october = operator_api.post(
        "/api/v1/incidents",
        {"title": "Llama slow", "severity": "sev2", "impact": "degraded",
         "started_at": "2026-10-10T10:00:00Z", "resolved_at": "2026-10-10T12:00:00Z"},
    ).json()  # fmt: skip
    month_close(month=datetime(2026, 10, 1, tzinfo=UTC))
    open_from_before = operator_api.post(
        "/api/v1/incidents",
        {"title": "Long outage", "severity": "sev1", "impact": "major_outage",
         "started_at": "2026-09-28T00:00:00Z"},
    )  # fmt: skip
    spanning = operator_api.post(
        "/api/v1/maintenance",
        {"title": "Long window", "starts_at": "2026-09-30T22:00:00Z",
         "ends_at": "2026-11-01T02:00:00Z", "announced_at": "2026-09-01T00:00:00Z"},
    )  # fmt: skip
    assert [r.status_code for r in (open_from_before, spanning)] == [400, 400]
    assert open_from_before.json()["errors"][0]["field"] == "started_at"
    assert spanning.json()["errors"][0]["field"] == "starts_at"
    path = f"/api/v1/incidents/{october['id']}"
    for body, field in (
        ({"impact": "major_outage"}, "impact"),
        ({"tenants": ["tenant-a"]}, "tenants"),
        ({"resolved_at": "2026-10-10T18:00:00Z"}, "resolved_at"),
    ):
        refused = operator_api.patch(path, body, format="json")
        assert refused.status_code == 400, (body, refused.json())
        [error] = refused.json()["errors"]
        assert (error["field"], error["message"][:17]) == (field, "2026-10 is closed"), body
    assert Incident.objects.get(pk=october["id"]).impact == "degraded"
    edited = operator_api.patch(path, {"cause": "a bad driver"}, format="json")
    assert edited.status_code == 200, edited.json()


# ---------------------------------------------------------------- pages


def test_board_creates_an_incident_with_htmx_and_shows_its_card(users, client, llama):
    client.force_login(users["operator"])

    response = client.post(
        "/incidents/",
        {
            "title": "Qwen timeouts",
            "severity": "sev2",
            "impact": "partial_outage",
            "deployments": ["llama-70b@h100-a"],
            "message": "Looking into it.",
        },
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    assert response.templates[0].name == "metering/sla/_incident_board.html"
    incident = Incident.objects.get()
    html = response.content.decode()
    assert f'id="incident-{incident.pk}"' in html
    assert f"Incident #{incident.pk} opened." in html
    assert incident.started_at <= clock.now()


def test_board_shows_service_errors_next_to_the_field(users, client, llama):
    client.force_login(users["operator"])
    future = (clock.now() + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")

    response = client.post(
        "/incidents/",
        {"title": "x", "severity": "sev2", "impact": "degraded", "started_at": future},
        HTTP_HX_REQUEST="true",
    )

    assert response.context["form"].errors == {"started_at": ["must not be in the future"]}
    assert not Incident.objects.exists()


def test_board_refuses_a_start_outside_the_portals_years(users, client, llama):
    client.force_login(users["operator"])

    response = client.post(
        "/incidents/",
        {"title": "x", "severity": "sev2", "impact": "degraded", "started_at": "0001-01-01T00:00"},
        HTTP_HX_REQUEST="true",
    )

    assert response.context["form"].errors == {"started_at": ["must be within the years 2000–2100"]}
    assert not Incident.objects.exists()


def test_board_update_returns_the_card_and_refuses_going_back(users, client, llama):
    incident = _open(now=clock.now())
    client.force_login(users["operator"])
    url = f"/incidents/{incident.pk}/updates/"

    posted = client.post(
        url,
        {f"u{incident.pk}-status": "monitoring", f"u{incident.pk}-message": "Watching."},
        HTTP_HX_REQUEST="true",
    )
    refused = client.post(url, {f"u{incident.pk}-status": "identified"}, HTTP_HX_REQUEST="true")

    assert posted.status_code == 200 and "Update posted." in posted.content.decode()
    assert "cannot go back from monitoring to identified" in refused.content.decode()
    assert incident.updates.count() == 2


def test_incident_page_saves_the_postmortem(users, client, llama):
    incident = _open(resolved_at=T0 + timedelta(minutes=40), now=T0 + timedelta(days=1))
    client.force_login(users["operator"])

    response = client.post(
        f"/incidents/{incident.pk}/",
        {
            "title": incident.title,
            "severity": "sev1",
            "impact": "major_outage",
            "started_at": "2026-04-10T12:00",
            "resolved_at": "2026-04-10T12:40",
            "cause": "Switch failure.",
            "remediation": "Probe NVLink.",
        },
    )

    assert response.status_code == 302
    incident.refresh_from_db()
    assert (incident.cause, incident.remediation) == ("Switch failure.", "Probe NVLink.")


def test_incident_forms_take_and_show_times_as_iso_utc_never_the_browsers_locale(
    users, client, llama
):
    """ui.md, Forms: a time is typed and shown as "2026-04-10 12:00 UTC" (the zone may be
    left out), in a text input, not a datetime-local one that reads in the browser's locale."""
    incident = _open(resolved_at=T0 + timedelta(minutes=40), now=T0 + timedelta(days=1))
    client.force_login(users["operator"])
    body = {"title": incident.title, "severity": "sev1", "impact": "major_outage"}

    saved = client.post(
        f"/incidents/{incident.pk}/",
        {**body, "started_at": "2026-04-10 11:58:30 UTC", "resolved_at": "2026-04-10 12:40"},
    )
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    form = client.get("/incidents/").content.decode()

    assert saved.status_code == 302
    incident.refresh_from_db()
    assert (incident.started_at, incident.resolved_at) == (
        datetime(2026, 4, 10, 11, 58, 30, tzinfo=UTC),
        datetime(2026, 4, 10, 12, 40, tzinfo=UTC),
    )
    assert 'value="2026-04-10 11:58:30 UTC"' in page and 'value="2026-04-10 12:40:00 UTC"' in page
    assert 'type="datetime-local"' not in page + form
    assert 'placeholder="2026-11-19 03:00 UTC"' in form


def test_maintenance_page_announces_a_window(users, client, llama):
    client.force_login(users["operator"])
    starts = clock.now() + timedelta(days=2)

    response = client.post(
        "/incidents/maintenance/",
        {
            "title": "Upgrade",
            "starts_at": starts.strftime("%Y-%m-%dT%H:%M"),
            "ends_at": (starts + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"),
            "pools": ["h100-a"],
        },
    )

    assert response.status_code == 302
    assert [p.slug for p in MaintenanceWindow.objects.get().pools.all()] == ["h100-a"]


def test_status_page_is_public_and_never_names_tenants(client, tenant_a, llama):
    incident = _open(
        title="Llama 503s",
        deployments=[llama],
        now=clock.now(),
        started_at=clock.now() - timedelta(minutes=5),
    )
    incident_update_add(incident=incident, status="identified", message="Bad node found.", by=None)

    response = client.get("/status/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "Major outage" in html and "Llama 503s" in html and "Bad node found." in html
    assert "tenant-a" not in html and "Tenant A" not in html


def test_status_overview_bars_weigh_each_day(llama, qwen):
    # yesterday 40 min of major outage on llama: 1 - 2,400 / 86,400 = 35/36; the day before,
    # 2 h of partial outage: 1 - 0.3 x 7,200 / 86,400 = 39/40; qwen untouched
    now = datetime(2026, 4, 20, 12, tzinfo=UTC)
    _open(
        deployments=[llama],
        started_at=datetime(2026, 4, 19, 9, tzinfo=UTC),
        resolved_at=datetime(2026, 4, 19, 9, 40, tzinfo=UTC),
        now=now,
    )
    _open(
        deployments=[llama],
        impact="partial_outage",
        started_at=datetime(2026, 4, 18, 9, tzinfo=UTC),
        resolved_at=datetime(2026, 4, 18, 11, tzinfo=UTC),
        now=now,
    )

    rows = {row.model.slug: row for row in status_overview(now=now)}

    days = rows["llama-70b"].days
    assert len(days) == 90 and days[-1].day == datetime(2026, 4, 20, tzinfo=UTC)
    assert days[-2].uptime == Fraction(35, 36) and days[-2].worst_impact == "major_outage"
    assert days[-3].uptime == Fraction(39, 40) and days[-3].worst_impact == "partial_outage"
    # 90 days up to now: 89 days + 12 h = 7,732,800 s; D = 2,400 + 2,160 = 4,560
    assert rows["llama-70b"].uptime == 1 - Fraction(4_560, 7_732_800)
    assert rows["llama-70b"].status == "operational"
    assert rows["qwen-32b"].uptime == 1


def test_status_overview_current_status_is_the_worst_open_impact(llama):
    now = clock.now()
    _open(deployments=[llama], impact="degraded", started_at=now - timedelta(hours=1), now=now)
    _open(impact="partial_outage", started_at=now - timedelta(minutes=5), now=now)

    (row,) = status_overview(now=now)

    assert row.status == "partial_outage"


# ---------------------------------------------------------------- demo


def test_demo_step_adds_two_incidents_and_a_maintenance_window_once(db):
    from metering.demo.factory import demo_factory
    from metering.demo.sla import demo_incidents

    demo_factory(stdout=io.StringIO())
    demo_incidents(stdout=io.StringIO())
    demo_incidents(stdout=io.StringIO())

    major, partial = Incident.objects.order_by("started_at")
    assert (major.impact, major.status) == ("major_outage", "resolved")
    assert major.resolved_at - major.started_at == timedelta(minutes=40)
    assert [d.slug for d in major.deployments.all()] == ["qwen3-235b-a22b@h200-a"]
    assert major.cause and major.remediation
    assert partial.updates.filter(impact="partial_outage").exists()
    window = MaintenanceWindow.objects.get()
    assert window.ends_at - window.starts_at == timedelta(hours=2)
    assert window.announced_at == window.starts_at - timedelta(days=7)


def test_maintenance_page_cancels_only_windows_not_started(users, client, llama):
    now = clock.now()
    upcoming = maintenance_window_create(
        title="Later",
        starts_at=now + timedelta(days=1),
        ends_at=now + timedelta(days=1, hours=1),
        by=None,
    )
    started = maintenance_window_create(
        title="Running",
        starts_at=now + timedelta(seconds=1),
        ends_at=now + timedelta(hours=1),
        by=None,
        now=now - timedelta(days=1),
    )
    client.force_login(users["operator"])
    MaintenanceWindow.objects.filter(pk=started.pk).update(starts_at=now - timedelta(minutes=5))

    client.post(f"/incidents/maintenance/{upcoming.pk}/cancel/")
    response = client.post(f"/incidents/maintenance/{started.pk}/cancel/", follow=True)

    assert list(MaintenanceWindow.objects.values_list("title", flat=True)) == ["Running"]
    assert "this maintenance has started: it can no longer change" in response.content.decode()


def test_status_bars_before_a_model_was_served_say_no_data(client, db):
    """A model whose pool entered service 10 days ago: the 80 days before are drawn as "no
    data", not as green days of no downtime, and its uptime is over the 10 days served."""
    now = clock.now()
    deployment = make_deployment(model="llama-70b", pool="h100-a")
    Pool.objects.filter(pk=deployment.pool_id).update(
        in_service_from=now.replace(hour=0) - timedelta(days=9)
    )

    html = client.get("/status/").content.decode()

    assert html.count('class="bar bar-nodata"') == 80 + 1  # the legend has one too
    assert html.count('class="bar bar-ok"') == 10 + 1
    assert "no data (not in service)" in html
