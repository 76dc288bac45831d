"""The incident history: every incident a user may see, filtered, paginated, with its
timeline; the SLA table links a month's incidents to it."""

from datetime import UTC, datetime, timedelta

import pytest

from metering.services.sla.incidents import incident_create, incident_update_add
from portal.models import Tenant
from tests.metering.factories import make_deployment, make_hourly_usage

pytestmark = pytest.mark.both_backends

NOW = datetime(2026, 6, 20, tzinfo=UTC)


def _incident(title, start, *, impact="degraded", deployments=(), tenants=(), hours=1):
    return incident_create(
        title=title,
        severity="sev2",
        impact=impact,
        started_at=start,
        resolved_at=start + timedelta(hours=hours) if hours else None,
        deployments=list(deployments),
        tenants=list(tenants),
        by=None,
        now=NOW,
    )


@pytest.fixture
def history(db):
    llama = make_deployment(model="llama-70b", pool="h100-a")
    qwen = make_deployment(model="qwen-32b", pool="h200-a")
    acme = Tenant.objects.create(slug="acme", name="Acme")
    other = Tenant.objects.create(slug="other", name="Other")
    make_hourly_usage(acme, llama, datetime(2026, 4, 3, tzinfo=UTC), requests=5)
    made = {
        "april_llama": _incident("Llama slow", datetime(2026, 4, 10, tzinfo=UTC),
                                 deployments=[llama], hours=0),
        "april_qwen": _incident("Qwen down", datetime(2026, 4, 12, tzinfo=UTC),
                                impact="major_outage", deployments=[qwen]),
        "may_other": _incident("Other's gateway", datetime(2026, 5, 2, tzinfo=UTC),
                               tenants=[other]),
        "open": _incident("Still going", datetime(2026, 6, 19, tzinfo=UTC),
                          deployments=[llama], hours=0),
    }  # fmt: skip
    # A degraded incident that became a partial outage: its worst impact is partial.
    for status, message, impact, minute in (
        ("identified", "worse", "partial_outage", 20),
        ("resolved", "fixed", "", 59),
    ):
        incident_update_add(incident=made["april_llama"], status=status, message=message,
                            impact=impact, time=datetime(2026, 4, 10, 0, minute, tzinfo=UTC),
                            by=None)  # fmt: skip
    return made


def _ids(response) -> list[int]:
    return [row["incident"].pk for row in response.context["rows"]]


def test_every_incident_newest_first_and_each_filter(history, users, session_client):
    finance = session_client(users["finance"])
    ids = {name: incident.pk for name, incident in history.items()}

    every = finance.get("/incidents/history/")
    april = finance.get("/incidents/history/", {"month": "2026-04"})
    partial = finance.get("/incidents/history/", {"impact": "partial_outage"})
    qwen = finance.get("/incidents/history/", {"deployment": "qwen-32b@h200-a"})
    open_ = finance.get("/incidents/history/", {"status": "open"})
    other = finance.get("/incidents/history/", {"tenant": "other"})
    bad = finance.get("/incidents/history/", {"month": "2026-13", "impact": "meteor"})

    assert _ids(every) == [ids["open"], ids["may_other"], ids["april_qwen"], ids["april_llama"]]
    assert _ids(april) == [ids["april_qwen"], ids["april_llama"]]
    assert _ids(partial) == [ids["april_llama"]]  # its worst impact, not its opening one
    assert _ids(qwen) == [ids["april_qwen"]]
    assert _ids(open_) == [ids["open"]]
    assert _ids(other) == [ids["may_other"]]
    assert bad.status_code == 400 and _ids(bad) == []
    assert set(bad.context["form"].errors) == {"month", "impact"}
    page = every.content.decode()
    assert "Timeline (3 entries)" in page and "worse" in page


def test_a_member_sees_only_the_incidents_that_touched_its_tenant(
    history, make_user, session_client
):
    member = session_client(make_user("tenant", tenant=Tenant.objects.get(slug="acme")))

    response = member.get("/incidents/history/")
    own = member.get("/incidents/history/", {"tenant": "acme"})
    other = member.get("/incidents/history/", {"tenant": "other"})

    # acme used llama in April: the llama incidents touched it; the open one (June, no
    # usage) and qwen's and other's did not. Another tenant's slug is a 404, as on every
    # list (portal/filters.py), and the tenant filter is not shown to a member.
    assert _ids(response) == [history["april_llama"].pk]
    assert _ids(own) == [history["april_llama"].pk]
    assert other.status_code == 404
    page = response.content.decode()
    assert "Tenants named" not in page and 'name="tenant"' not in page


def test_the_history_is_paginated_by_25(db, users, session_client):
    llama = make_deployment(model="llama-70b", pool="h100-a")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(30):
        _incident(f"blip {n}", start + timedelta(days=n), deployments=[llama])

    first = session_client(users["operator"]).get("/incidents/history/")
    second = session_client(users["operator"]).get("/incidents/history/", {"page": 2})

    assert len(_ids(first)) == 25 and len(_ids(second)) == 5
    assert "Page 1 of 2" in first.content.decode()
    assert set(_ids(first)).isdisjoint(_ids(second))


def test_the_api_filters_as_the_page_does(history, users, token_client):
    api = token_client(users["finance"])

    partial = api.get("/api/v1/incidents", {"impact": "partial_outage"}).json()["results"]
    qwen = api.get("/api/v1/incidents", {"deployment": "qwen-32b@h200-a"}).json()["results"]
    refused = api.get("/api/v1/incidents", {"impact": "meteor"})

    assert [i["id"] for i in partial] == [history["april_llama"].pk]
    assert [i["id"] for i in qwen] == [history["april_qwen"].pk]
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "impact"


def test_an_sla_months_incident_count_links_to_its_history(history, users, session_client):
    page = session_client(users["finance"]).get("/billing/sla/?month=2026-04").content.decode()

    assert '/incidents/history/?month=2026-04&amp;tenant=acme"' in page


def test_the_history_gives_the_title_room_and_the_forms_fit_the_longest_impact(
    history, users, session_client
):
    """The title column is the wide one (it wrapped a word a line beside unbreakable
    times); times break between the date and the time of day; the severity and impact
    fields sit in a row that gives each its longest choice ("Degraded performance" was cut
    to "Degraded performanc") and wraps when the two do not fit."""
    from pathlib import Path

    from django.conf import settings

    client = session_client(users["operator"])
    page = client.get("/incidents/history/").content.decode()
    incident = client.get(f"/incidents/{history['april_llama'].pk}/").content.decode()

    assert page.count('<td class="incident-title">') == 4
    assert (
        '<td class="moment"><span class="nowrap">2026-04-10</span> '
        '<span class="nowrap">00:00</span></td>'
    ) in page
    assert incident.count('<div class="form-row fit">') == 1  # severity and opening impact
    css = (Path(settings.BASE_DIR) / "static/css/portal.css").read_text()
    assert ".form-row.fit { display: flex; flex-wrap: wrap; }" in css
    assert ".table td.incident-title { min-width: 15em; }" in css
