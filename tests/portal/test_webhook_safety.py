"""What a webhook endpoint may not do: leave its secret in the audit log, or reach inside
the factory's network (architecture.md "Alerts and notifications"; settings
WEBHOOK_ALLOW_LOOPBACK and WEBHOOK_ALLOW_PRIVATE). Names resolve through a stub of the
system's resolver: no test sends traffic anywhere but loopback."""

from __future__ import annotations

import json
import socket
from importlib import import_module

import pytest
from django.db import connection, transaction
from django.db.migrations.loader import MigrationLoader

from portal.delivery import deliveries_send
from portal.errors import FieldError
from portal.events import event_raise
from portal.models import AuditEntry, Delivery, DeliveryAttempt, WebhookEndpoint
from portal.services import audit_record
from portal.webhooks import url_check

REAL_GETADDRINFO = socket.getaddrinfo


@pytest.fixture
def resolver(monkeypatch):
    """`resolver[name] = address`: the stub's answers; literal addresses (in every form the
    system takes) resolve as the system resolves them, locally."""
    names: dict[str, str] = {}

    def getaddrinfo(host, port, *args, **kwargs):
        if host in names:
            return REAL_GETADDRINFO(names[host], port, *args, **kwargs)
        try:
            return REAL_GETADDRINFO(host, port, *args, flags=socket.AI_NUMERICHOST)
        except socket.gaierror:
            raise socket.gaierror(socket.EAI_NONAME, "unknown in this test") from None

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


def _create(client, url):
    return client.post("/api/v1/webhook-endpoints", {"url": url}, format="json")


# --------------------------------------------------------------------------- secrets


def test_the_audit_log_of_a_created_and_rotated_endpoint_holds_no_secret(
    users, token_client, tenant_a, resolver
):
    resolver["hooks.example.com"] = "93.184.215.14"
    client = token_client(users["tenant"], scopes=["notify"])
    created = _create(client, "https://hooks.example.com/portal").json()
    rotated = client.post(f"/api/v1/webhook-endpoints/{created['id']}/rotate").json()
    client.patch(f"/api/v1/webhook-endpoints/{created['id']}", {"enabled": False}, format="json")
    client.delete(f"/api/v1/webhook-endpoints/{created['id']}")
    secrets = {created["secret"], rotated["secret"]}
    assert all(s.startswith("whsec_") for s in secrets)

    entries = AuditEntry.objects.filter(object_type="webhook_endpoint").order_by("pk")
    assert [e.action for e in entries] == ["create", "rotate", "update", "delete"]
    stored = json.dumps([[e.before, e.after] for e in entries])
    assert "whsec_" not in stored
    rotate = entries[1]
    assert (rotate.before["secret"], rotate.before["previous_secret"]) == ("(set)", "")
    assert (rotate.after["secret"], rotate.after["previous_secret"]) == ("(set)", "(set)")
    # Nor does the audit log's API or page show one to an operator reading it.
    reader = token_client(users["operator"], scopes=["read"])
    assert "whsec_" not in reader.get("/api/v1/audit?page_size=100").content.decode()


def test_the_migration_redacts_the_secrets_entries_already_hold(users):
    secret = "whsec_" + "A" * 44
    entry = audit_record(
        actor=users["operator"], action="rotate", object_type="webhook_endpoint",
        object_id="7", before={"url": "https://x.example", "secret": secret, "previous_secret": ""},
        after={"secret": secret + "B", "previous_secret": secret, "enabled": True},
    )  # fmt: skip
    other = audit_record(
        actor=None, action="update", object_type="tenant", object_id="1",
        after={"secret": "not a credential of a tenant"},
    )  # fmt: skip
    migration = import_module("portal.migrations.0009_audit_credentials_redacted")
    # The originals' graph: the test database was migrated by the squashed migration.
    loader = MigrationLoader(connection, replace_migrations=False)
    state = loader.project_state(("portal", "0007_alert_rules"))
    with connection.schema_editor() as editor:
        migration.redact(state.apps, editor)
    entry = AuditEntry.objects.get(pk=entry.pk)
    assert entry.before == {"url": "https://x.example", "secret": "(set)", "previous_secret": ""}
    assert entry.after == {"secret": "(set)", "previous_secret": "(set)", "enabled": True}
    assert AuditEntry.objects.get(pk=other.pk).after == {"secret": "not a credential of a tenant"}
    if connection.vendor == "postgresql":  # the append-only guard is back
        with (
            pytest.raises(Exception, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute("UPDATE portal_auditentry SET action = 'x' WHERE id = %s", [entry.pk])


# ----------------------------------------------------------------------- destinations

REFUSED = {
    "https://169.254.169.254/latest/meta-data/": "a cloud metadata address",
    "https://[fd00:ec2::254]/": "a cloud metadata address",
    "https://100.100.100.200/": "a cloud metadata address",
    "https://10.0.0.1/": "a private address",
    "https://172.16.5.4/": "a private address",
    "https://192.168.1.1:8443/": "a private address",
    "https://100.64.0.1/": "a private address",
    "https://[fc00::1]/": "a private address",
    "https://[fd12:3456::1]/": "a private address",
    "https://127.0.0.1/": "a loopback address",
    "https://127.9.9.9/": "a loopback address",
    "https://[::1]/": "a loopback address",
    "https://localhost/": "a loopback address",
    "http://localhost:8009/": "a loopback address",
    "https://169.254.1.1/": "a link-local address",
    "https://[fe80::1]/": "a link-local address",
    "https://224.0.0.1/": "a multicast address",
    "https://[ff02::1]/": "a multicast address",
    "https://0.0.0.0/": "an unspecified address",
    "https://0.1.2.3/": "an unspecified address",
    "https://[::]/": "an unspecified address",
    "https://255.255.255.255/": "a reserved address",
    "https://240.0.0.1/": "a reserved address",
    # IPv4-mapped, IPv4-compatible, 6to4 and NAT64 forms of inside addresses
    "https://[::ffff:169.254.169.254]/": "a cloud metadata address",
    "https://[::ffff:10.0.0.1]/": "a private address",
    "https://[::ffff:127.0.0.1]/": "a loopback address",
    "https://[::ffff:a9fe:a9fe]/": "a cloud metadata address",
    "https://[::10.0.0.1]/": "a private address",
    "https://[2002:a9fe:a9fe::1]/": "a cloud metadata address",
    "https://[64:ff9b::a9fe:a9fe]/": "a cloud metadata address",
    # decimal, octal, hexadecimal and short IPv4 forms
    "https://2130706433/": "a loopback address",
    "https://2852039166/": "a cloud metadata address",
    "https://0251.0376.0251.0376/": "a cloud metadata address",
    "https://0x7f.1/": "a loopback address",
    "https://0xa9fea9fe/": "a cloud metadata address",
    "https://10.1/": "a private address",
    "https://017700000001/": "a loopback address",
    # names resolving inside
    "https://metadata.internal.example/": "a cloud metadata address",
    "https://rebind.example/": "a private address",
}


@pytest.mark.parametrize("url", list(REFUSED))
def test_each_inside_address_form_is_refused_at_creation_naming_url(
    url, users, token_client, tenant_a, resolver
):
    resolver["metadata.internal.example"] = "169.254.169.254"
    resolver["rebind.example"] = "10.20.30.40"
    client = token_client(users["tenant"], scopes=["notify"])
    response = _create(client, url)
    assert response.status_code == 400, response.json()
    [error] = response.json()["errors"]
    assert error["field"] == "url"
    assert not WebhookEndpoint.objects.exists()
    # The URL field refuses the legacy numeric forms before the rule does; the rule refuses
    # them too, wherever a URL comes from.
    assert error["message"] == "Enter a valid URL." or REFUSED[url] in error["message"]
    with pytest.raises(FieldError, match=REFUSED[url]):
        url_check(url)


def test_a_change_of_url_to_an_inside_address_is_refused_too(
    users, token_client, tenant_a, resolver
):
    resolver["hooks.example.com"] = "93.184.215.14"
    client = token_client(users["tenant"], scopes=["notify"])
    endpoint = _create(client, "https://hooks.example.com/").json()
    response = client.patch(
        f"/api/v1/webhook-endpoints/{endpoint['id']}",
        {"url": "https://[::ffff:169.254.169.254]/"},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "url"
    assert WebhookEndpoint.objects.get().url == "https://hooks.example.com/"


def test_private_addresses_only_with_webhook_allow_private_and_never_metadata(
    users, token_client, tenant_a, resolver, settings
):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    client = token_client(users["operator"], scopes=["notify"])
    for url in ("https://10.0.0.1/hooks", "https://[fd12:3456::1]/", "https://192.168.1.1/"):
        assert _create(client, url).status_code == 201, url
    for url in (
        "https://169.254.169.254/",
        "https://[::ffff:169.254.169.254]/",
        "https://127.0.0.1/",
        "http://10.0.0.1/",
    ):
        response = _create(client, url)
        assert response.status_code == 400, url
        assert response.json()["errors"][0]["field"] == "url"
    settings.WEBHOOK_ALLOW_LOOPBACK = True
    assert _create(client, "http://127.0.0.1:8009/hooks").status_code == 201
    assert _create(client, "https://169.254.169.254/").status_code == 400


@pytest.mark.django_db(transaction=True)
def test_a_host_that_resolves_inside_at_delivery_is_refused_and_the_attempt_recorded(
    users, token_client, tenant_a, resolver
):
    resolver["hooks.example.com"] = "93.184.215.14"
    client = token_client(users["tenant"], scopes=["notify"])
    _create(client, "https://hooks.example.com/portal")
    resolver["hooks.example.com"] = "169.254.169.254"  # DNS rebinding after the check
    with transaction.atomic():
        event_raise(
            type="invoice.issued", summary="Invoice issued", data={"invoice": "INV-1"},
            tenant=tenant_a, for_factory=False, link="",
        )  # fmt: skip
    deliveries_send(wait_s=20)
    [attempt] = DeliveryAttempt.objects.all()
    assert attempt.status_code is None
    assert attempt.latency_ms == 0
    assert attempt.response == ""
    assert attempt.error == (
        "refused: hooks.example.com (169.254.169.254) is a cloud metadata address"
    )
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == (Delivery.State.PENDING, 1)
    answer = client.get(f"/api/v1/webhook-endpoints/{delivery.endpoint_id}/deliveries").json()
    [shown] = answer["results"][0]["attempts"]
    assert shown["error"] == attempt.error
