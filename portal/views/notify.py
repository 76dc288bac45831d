"""Notifications: the inbox of the events a user may see, webhook endpoints with their
delivery log, and email opt-ins (architecture.md "Alerts and notifications")."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from portal.access import user_role
from portal.decorators import role_required
from portal.delivery import delivery_replay
from portal.errors import FieldError
from portal.events import (
    email_subscriptions_set,
    event_types_for,
    inbox_list,
    inbox_mark_read,
)
from portal.forms import EmailForm, EndpointForm
from portal.models import Delivery, EmailSubscription, Role
from portal.pager import pager_page
from portal.shell import page_opens
from portal.webhooks import (
    deliveries_of,
    endpoint_create,
    endpoint_delete,
    endpoint_list,
    endpoint_rotate,
    endpoint_summaries,
    endpoint_update,
)

NOTIFYING = (Role.OPERATOR, Role.FINANCE, Role.TENANT)


@role_required(*NOTIFYING)
def inbox(request):
    """The events the user may see, newest first; unread ones marked."""
    if request.method == "POST":
        count = inbox_mark_read(user=request.user)
        messages.success(request, f"{count} marked read.")
        return redirect("inbox")
    page = pager_page(request, inbox_list(user=request.user).select_related("tenant"))
    return render(request, "portal/notify/inbox.html", {"title": "Inbox", "page": page})


@role_required(*NOTIFYING)
def inbox_open(request, pk: int):
    """Mark one event read and go to its page (back to the inbox when that page is not
    the user's role's to open)."""
    event = get_object_or_404(inbox_list(user=request.user), pk=pk)
    inbox_mark_read(user=request.user, event_ids=[event.pk])
    opens = event.link and page_opens(event.link, user_role(request.user))
    return redirect(event.link if opens else "inbox")


@role_required(*NOTIFYING)
def notifications(request):
    """Email opt-ins and webhook endpoints: create one (its secret shown once)."""
    types = event_types_for(request.user)
    staff = user_role(request.user) in (Role.OPERATOR, Role.FINANCE)
    chosen = list(
        EmailSubscription.objects.filter(user=request.user).values_list("event_type", flat=True)
    )
    email_form = EmailForm(initial={"event_types": chosen}, event_types=types)
    endpoint_form = EndpointForm(event_types=types, staff=staff)
    secret = None
    if request.method == "POST" and request.POST.get("form") == "email":
        email_form = EmailForm(request.POST, event_types=types)
        if email_form.is_valid():
            email_subscriptions_set(
                user=request.user, event_types=email_form.cleaned_data["event_types"]
            )
            messages.success(request, "Email preferences saved.")
            return redirect("notifications")
    elif request.method == "POST":
        endpoint_form = EndpointForm(request.POST, event_types=types, staff=staff)
        if endpoint_form.is_valid():
            data = endpoint_form.cleaned_data
            try:
                endpoint = endpoint_create(
                    url=data["url"],
                    description=data["description"],
                    event_types=data["event_types"],
                    tenant=data.get("tenant"),
                    by=request.user,
                )
            except FieldError as error:
                endpoint_form.add_error(
                    error.field if error.field in endpoint_form.fields else None, error.message
                )
            else:
                secret = endpoint.secret
                endpoint_form = EndpointForm(event_types=types, staff=staff)
    endpoints = endpoint_summaries(user=request.user)
    return render(
        request,
        "portal/notify/notifications.html",
        {
            "title": "Notifications",
            "email_form": email_form,
            "endpoint_form": endpoint_form,
            "endpoints": endpoints,
            "secret": secret,
            "has_email": bool(request.user.email),
        },
        status=400 if endpoint_form.errors or email_form.errors else 200,
    )


@role_required(*NOTIFYING)
def endpoint_deliveries(request, pk: int):
    """An endpoint's delivery log: each delivery with its attempts; a POST acts on the
    endpoint (`action`: rotate, enable, disable, delete)."""
    endpoint = get_object_or_404(endpoint_list(user=request.user), pk=pk)
    if request.method == "POST":
        return _endpoint_action(request, endpoint, request.POST.get("action", ""))
    page = pager_page(request, deliveries_of(endpoint=endpoint))
    return render(
        request,
        "portal/notify/deliveries.html",
        {"title": "Delivery log", "endpoint": endpoint, "page": page},
    )


def _endpoint_action(request, endpoint, action: str):
    """rotate (the new secret shown once), enable, disable or delete an endpoint."""
    try:
        if action == "rotate":
            endpoint = endpoint_rotate(endpoint=endpoint, by=request.user)
            return render(
                request,
                "portal/notify/secret.html",
                {"title": "New signing secret", "endpoint": endpoint},
            )
        if action in ("enable", "disable"):
            endpoint_update(
                endpoint=endpoint, changes={"enabled": action == "enable"}, by=request.user
            )
            messages.success(request, f"{endpoint.url} {action}d.")
        elif action == "delete":
            endpoint_delete(endpoint=endpoint, by=request.user)
            messages.success(request, f"{endpoint.url} deleted.")
        else:
            return redirect("notifications")
    except FieldError as error:
        messages.error(request, error.message)
    return redirect("notifications")


@require_POST
@role_required(*NOTIFYING)
def replay(request, pk: int):
    """Deliver again with the same webhook-id."""
    delivery = get_object_or_404(
        Delivery.objects.select_related("endpoint"),
        pk=pk,
        endpoint__in=endpoint_list(user=request.user),
    )
    try:
        delivery_replay(delivery=delivery, by=request.user)
    except FieldError as error:
        messages.error(request, error.message)
        return redirect("endpoint-deliveries", pk=delivery.endpoint_id)
    messages.success(request, f"Delivery {delivery.pk} queued again with the same webhook-id.")
    return redirect("endpoint-deliveries", pk=delivery.endpoint_id)
