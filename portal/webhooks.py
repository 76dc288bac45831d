"""Webhook endpoints: who may hold which, the URL rule, secrets and their rotation, and the
Standard Webhooks signature of a delivery (architecture.md "Alerts and notifications")."""

from __future__ import annotations

import base64
import ipaddress
import json
import secrets
import socket
from collections.abc import Sequence
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import User
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from portal.access import tenant_scoped, user_role, user_tenant
from portal.errors import FieldError
from portal.events import BILLING_EVENTS, EVENT_TYPES
from portal.formatting import rfc3339
from portal.models import Delivery, Event, Role, Tenant, WebhookEndpoint
from portal.services import audit_object, audit_snapshot, object_delete

ROTATION_OVERLAP = timedelta(hours=24)  # the old secret keeps signing beside the new one


class EndpointForbidden(FieldError):
    """The user's role may not hold this endpoint (403)."""

    http_status = 403


def endpoint_list(*, user: User):
    """The endpoints a user may see: every one for staff, its tenant's for a member; the
    factory's first, then by tenant name, then oldest first (on every backend)."""
    endpoints = tenant_scoped(WebhookEndpoint.objects.select_related("tenant"), user=user)
    return endpoints.order_by(F("tenant__name").asc(nulls_first=True), "pk")


def endpoint_summaries(*, user: User):
    """The endpoints a user may see with their deliveries counted by state."""
    by_state = {
        state: Count("deliveries", filter=Q(deliveries__state=state))
        for state in Delivery.State.values
    }
    return endpoint_list(user=user).annotate(**by_state)


def deliveries_of(*, endpoint: WebhookEndpoint):
    """An endpoint's deliveries, newest first, with their event and attempts."""
    return (
        Delivery.objects.filter(endpoint=endpoint)
        .select_related("event")
        .prefetch_related("attempt_log")
    )


def secret_new() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


# Addresses a webhook may never reach, whatever the settings: cloud metadata services
# (AWS, GCP, Azure and OpenStack's 169.254.169.254, AWS's IPv6 one, Alibaba's).
METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")
THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")  # connects to the host itself on Linux


class DestinationRefused(FieldError):
    """A webhook URL whose host is, or resolves to, an address it may not reach."""


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for: IPv4-mapped, 6to4, NAT64, IPv4-compatible."""
    if address.ipv4_mapped or address.sixtofour:
        return address.ipv4_mapped or address.sixtofour
    if address in NAT64 or (int(address) >> 32 == 0 and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_refusal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why a webhook may not reach `address` under the settings, or None: metadata,
    unspecified, link-local, multicast and reserved never; loopback only with DEBUG or
    WEBHOOK_ALLOW_LOOPBACK; other non-public addresses (private, unique-local, shared)
    only with WEBHOOK_ALLOW_PRIVATE."""
    if isinstance(address, ipaddress.IPv6Address) and (inner := _embedded_ipv4(address)):
        address = inner
    if address in METADATA:
        return "a cloud metadata address"
    if address.is_unspecified or address in THIS_NETWORK:
        return "an unspecified address"
    if address.is_loopback:
        if settings.DEBUG or settings.WEBHOOK_ALLOW_LOOPBACK:
            return None
        return "a loopback address (allowed with WEBHOOK_ALLOW_LOOPBACK=1)"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_reserved or address == ipaddress.IPv4Address("255.255.255.255"):
        return "a reserved address"
    if not address.is_global and not settings.WEBHOOK_ALLOW_PRIVATE:
        return "a private address (allowed with WEBHOOK_ALLOW_PRIVATE=1)"
    return None


def host_addresses(host: str, port: int | None) -> list[str]:
    """Every address `host` resolves to now (a literal address in any form the system
    takes, decimal and octal IPv4 included, is itself; `localhost` and its subdomains are
    loopback, RFC 6761); [] when it does not resolve."""
    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return ["127.0.0.1"]
    try:
        found = socket.getaddrinfo(host, port or 443, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    return list(dict.fromkeys(info[4][0] for info in found))


def destination_check(host: str, port: int | None) -> list[str]:
    """The addresses of `host` a webhook may reach, refused (naming `url`) when any of
    them may not be reached: checked when an endpoint is saved and again at each
    connection, so a name resolving elsewhere later (DNS rebinding) is refused then."""
    addresses = host_addresses(host, port)
    for text in addresses:
        address = ipaddress.ip_address(text.split("%")[0])
        if refusal := address_refusal(address):
            shown = host if host == text else f"{host} ({text})"
            raise DestinationRefused("url", f"{shown} is {refusal}")
    return addresses


def url_check(url: str) -> str:
    """https (http to a loopback address when loopback is allowed), no credentials in it,
    to a host that is not and does not resolve to an address a webhook may not reach
    (address_refusal). Returns the URL."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        raise FieldError("url", "must not carry credentials; the signature authenticates us")
    try:
        port = parts.port
    except ValueError:
        raise FieldError("url", "has an invalid port") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise FieldError("url", "must be an https URL")
    addresses = destination_check(parts.hostname, port)
    if parts.scheme == "http" and not (
        parts.hostname == "localhost"
        or (addresses and all(ipaddress.ip_address(a).is_loopback for a in addresses))
    ):
        raise FieldError("url", "must be an https URL (http is accepted to loopback only)")
    return url


def _types_check(event_types: Sequence[str]) -> list[str]:
    unknown = [t for t in event_types if t not in EVENT_TYPES]
    if unknown:
        raise FieldError("event_types", f"unknown event type {unknown[0]!r}")
    return list(dict.fromkeys(event_types))


def endpoint_access_check(*, user: User, tenant: Tenant | None, event_types: Sequence[str]):
    """Refuse an endpoint the user may not hold: operators hold the factory's and any
    tenant's; finance any tenant's and the factory's for billing events only; a tenant's
    members their own tenant's; investors none."""
    role = user_role(user)
    if role is Role.OPERATOR:
        return
    if role is Role.FINANCE:
        if tenant is not None or (event_types and set(event_types) <= BILLING_EVENTS):
            return
        raise EndpointForbidden(
            "event_types",
            "finance holds the factory's endpoints for billing events only: "
            + ", ".join(sorted(BILLING_EVENTS)),
        )
    if role is Role.TENANT:
        own = user_tenant(user)
        if tenant is not None and own is not None and tenant.pk == own.pk:
            return
        raise EndpointForbidden("tenant", "a member holds endpoints of its own tenant only")
    raise EndpointForbidden("", "your role may not hold webhook endpoints")


@transaction.atomic
def endpoint_create(
    *,
    url: str,
    event_types: Sequence[str] = (),
    tenant: Tenant | None = None,
    description: str = "",
    enabled: bool = True,
    by: User,
) -> WebhookEndpoint:
    """A new endpoint with a new secret (shown once: the caller returns `secret`)."""
    types = _types_check(event_types)
    if user_role(by) is Role.TENANT and tenant is None:
        tenant = user_tenant(by)  # a member's endpoint is its tenant's
    endpoint_access_check(user=by, tenant=tenant, event_types=types)
    endpoint = WebhookEndpoint.objects.create(
        url=url_check(url),
        event_types=types,
        tenant=tenant,
        description=description,
        enabled=enabled,
        secret=secret_new(),
    )
    audit_object(obj=endpoint, actor=by, action="create", object_type="webhook_endpoint")
    return endpoint


@transaction.atomic
def endpoint_update(*, endpoint: WebhookEndpoint, changes: dict, by: User) -> WebhookEndpoint:
    """Change url, event types, description or enabled (the tenant is fixed); enabling
    again clears why it was disabled."""
    before = audit_snapshot(endpoint)
    if "url" in changes:
        endpoint.url = url_check(changes["url"])
    if "event_types" in changes:
        endpoint.event_types = _types_check(changes["event_types"])
    if "description" in changes:
        endpoint.description = changes["description"]
    if "enabled" in changes:
        endpoint.enabled = changes["enabled"]
        if endpoint.enabled:
            endpoint.disabled_reason = ""
    endpoint_access_check(user=by, tenant=endpoint.tenant, event_types=endpoint.event_types)
    endpoint.save()
    audit_object(
        obj=endpoint, actor=by, action="update", object_type="webhook_endpoint", before=before
    )
    return endpoint


@transaction.atomic
def endpoint_rotate(*, endpoint: WebhookEndpoint, by: User) -> WebhookEndpoint:
    """A new secret; the current one keeps signing beside it for 24 hours."""
    endpoint_access_check(user=by, tenant=endpoint.tenant, event_types=endpoint.event_types)
    before = audit_snapshot(endpoint)
    endpoint.previous_secret = endpoint.secret
    endpoint.previous_secret_until = timezone.now() + ROTATION_OVERLAP
    endpoint.secret = secret_new()
    endpoint.save()
    audit_object(
        obj=endpoint, actor=by, action="rotate", object_type="webhook_endpoint", before=before
    )
    return endpoint


@transaction.atomic
def endpoint_delete(*, endpoint: WebhookEndpoint, by: User) -> None:
    endpoint_access_check(user=by, tenant=endpoint.tenant, event_types=endpoint.event_types)
    object_delete(obj=endpoint, actor=by, object_type="webhook_endpoint")


def endpoint_disable(*, endpoint: WebhookEndpoint, reason: str) -> None:
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(enabled=False, disabled_reason=reason)


# ---------------------------------------------------------------- what is sent


def event_body(event: Event) -> bytes:
    """The body of every delivery of `event`: {"type", "timestamp" (the event's time),
    "data"} with the event's summary (the sentence the inbox and the email show, for a
    receiver that relays it to people), link and id in data."""
    data = {**event.data, "event_id": event.webhook_id, "summary": event.summary}
    if event.link:
        data["link"] = settings.PORTAL_URL.rstrip("/") + event.link
    body = {
        "type": event.type,
        "timestamp": rfc3339(event.occurred_at),
        "data": data,
    }
    return json.dumps(body, cls=DjangoJSONEncoder, separators=(",", ":")).encode()


def signed_headers(*, endpoint: WebhookEndpoint, event: Event, body: bytes, at: datetime) -> dict:
    """The Standard Webhooks headers of one attempt at `at` (the real clock): one
    signature per secret in force."""
    keys = [endpoint.secret]
    if (
        endpoint.previous_secret
        and endpoint.previous_secret_until
        and at < endpoint.previous_secret_until
    ):
        keys.append(endpoint.previous_secret)
    signatures = [
        Webhook(key).sign(msg_id=event.webhook_id, timestamp=at, data=body) for key in keys
    ]
    return {
        "webhook-id": event.webhook_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": " ".join(signatures),
        "content-type": "application/json",
        "user-agent": "token-factory-portal/1",
    }
