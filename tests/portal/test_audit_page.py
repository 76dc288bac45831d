"""The audit log reads as field → before → after, in words, not as Python dicts; a creation
as the fields it set."""

import pytest

from portal.services import audit_record

pytestmark = pytest.mark.both_backends


def test_audit_entries_show_each_changed_field_before_and_after(client, users):
    audit_record(
        actor=users["operator"],
        action="tenant.update",
        object_type="tenant",
        object_id="7",
        before={"status": "active", "billing_name": None, "is_internal": False, "slug": "acme"},
        after={
            "status": "suspended",
            "billing_name": "Acme Ltd",
            "is_internal": True,
            "slug": "acme",
        },
    )
    audit_record(
        actor=None,
        action="pool.create",
        object_type="pool",
        object_id="3",
        after={
            "slug": "h100-a",
            "gpu_count": 8,
            "labels": ["eu", "prod"],
            "in_service_from": "2026-11-03T07:00:00Z",
            "retired_at": None,
        },
    )
    client.force_login(users["operator"])

    page = client.get("/audit/").content.decode()

    for shown in ("Status", "active", "suspended", "Billing name", "Acme Ltd", "Is internal",
                  "no", "yes", "Gpu count", "8", "eu, prod", "—", "2026-11-03 07:00 UTC"):  # fmt: skip
        assert f">{shown}<" in page, shown
    assert ">Slug<" in page  # the pool's creation lists every field; the tenant's kept slug…
    assert page.count(">acme<") == 0  # … is not a change
    # The creation lists what it set, with no arrow from nothing and no empty field.
    created = page[page.index(">pool.create<") :]
    created = created[: created.index("</tr></table>")]
    assert ">Retired at<" not in created and "→" not in created
    assert '<td colspan="3">h100-a</td>' in created
    for raw in ("None", "True", "False", "{'", "['", "2026-11-03T07"):
        assert raw not in page, raw


def test_audit_numbers_and_objects_read_as_people_write_them(client, users):
    audit_record(
        actor=None,
        action="lever.create",
        object_type="lever",
        object_id="4",
        after={
            "slug": "speculative-decoding",
            "one_time_cost": "60000.0000",
            "typical": "1.0500",
            "baseline": {"occupancy": "0.5502046290882828352305946280565395"},
            "gpus": 1000000,
            "zero": "0.0000",
            "small": -0.5,
        },
    )
    audit_record(actor=None, action="token.revoke", object_type="api_token", object_id="9")
    client.force_login(users["operator"])

    page = client.get("/audit/").content.decode()

    for shown in ("lever speculative-decoding", "60,000", "1.05", "occupancy: 0.5502",
                  "1,000,000", ">0<", "-0.5", "api token #9"):  # fmt: skip
        assert shown in page, shown
    assert "60000.0000" not in page and "0.55020462" not in page


def test_audit_entries_name_the_tenant_a_record_refers_to_and_its_times_in_utc(
    client, users, tenant_a
):
    """A member's alert rule, as its creation recorded it: "tenant": 1 reads as the tenant's
    name, a Python-written instant as UTC to the minute."""
    audit_record(
        actor=users["tenant"],
        action="create",
        object_type="alert_rule",
        object_id="8",
        after={
            "kind": "uptime_below_tier",
            "tenant": tenant_a.pk,
            "created_at": "2026-12-06 09:37:14.988712+00:00",
        },
    )
    client.force_login(users["operator"])

    page = client.get("/audit/").content.decode()

    assert '<th scope="row">Tenant</th><td colspan="3">Tenant A</td>' in page
    assert '<th scope="row">Created at</th><td colspan="3">2026-12-06 09:37 UTC</td>' in page
    assert "988712" not in page
