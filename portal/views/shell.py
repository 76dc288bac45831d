"""The shell's pages: sign-in, the home of each role, API tokens, the audit log and the
error pages."""

import json

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpResponseServerError, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST, require_safe

from portal.access import TOKEN_SCOPES, user_refusal, user_role, user_tenant
from portal.api.errors import api_not_found, api_server_error
from portal.audit import audit_list, audit_tenants_named
from portal.decorators import role_required
from portal.exports import export_query, list_csv
from portal.forms import TokenForm
from portal.models import ApiToken, Role
from portal.pager import pager_page
from portal.projects import projects_bindable
from portal.security import login_failed, login_locked_for, login_succeeded
from portal.services import token_create, token_revoke
from portal.shell import home_view

ALL_ROLES = tuple(Role)


class PortalAuthenticationForm(AuthenticationForm):
    """Sign-in refused to members of a suspended or closed tenant, after the password
    checked out (so it tells nothing to someone who does not know it)."""

    def confirm_login_allowed(self, user) -> None:
        super().confirm_login_allowed(user)
        if refusal := user_refusal(user):
            raise ValidationError(refusal, code="tenant_inactive")


class LoginView(auth_views.LoginView):
    """Sign-in with a lockout: LOGIN_FAILURE_LIMIT failures for a username or from an
    address lock both out for LOGIN_LOCKOUT_SECONDS (answered 429)."""

    template_name = "portal/login.html"
    authentication_form = PortalAuthenticationForm
    redirect_authenticated_user = True

    def post(self, request, *args, **kwargs):
        username = request.POST.get("username", "")
        ip = request.META.get("REMOTE_ADDR", "")
        if locked := login_locked_for(username=username, ip=ip):
            form = self.get_form()
            form.errors.clear()
            form.add_error(
                None,
                f"Too many failed sign-ins. Try again in {max(1, round(locked / 60))} minutes.",
            )
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        login_failed(username=self.request.POST.get("username", ""),
                     ip=self.request.META.get("REMOTE_ADDR", ""))  # fmt: skip
        return super().form_invalid(form)

    def form_valid(self, form):
        login_succeeded(username=form.get_user().get_username())
        return super().form_valid(form)


@require_safe
@role_required(*ALL_ROLES)
def home(request):
    """The landing page of each role: the view an app registered for it (portal.shell),
    else a welcome page."""
    role = user_role(request.user)
    if view := home_view(role):
        return view(request)
    return render(request, f"portal/home_{role.value}.html", {"title": "Home"})


@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def tokens(request):
    """The user's API tokens: create (shown once) and revoke."""
    choices = {
        "allowed": TOKEN_SCOPES[user_role(request.user)],
        # The projects it may bind an ingest token to: its own tenant's for a member.
        "projects": projects_bindable(user=request.user),
        "own_tenant": user_tenant(request.user),
    }
    # ?bound_tenant=: the tenant the operator chose, whose projects the form suggests
    initial = {"bound_tenant": request.GET.get("bound_tenant", "")}
    form = TokenForm(request.POST or None, initial=initial, **choices)
    created = None
    if request.method == "POST" and form.is_valid():
        try:
            _, created = token_create(
                user=request.user,
                name=form.cleaned_data["name"],
                scopes=form.cleaned_data["scopes"],
                bound_tenant=form.cleaned_data.get("bound_tenant"),
                bound_project=form.cleaned_data.get("bound_project"),
            )
        except ValidationError as exc:
            for field, errs in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errs)
        else:
            form = TokenForm(**choices)
    return render(
        request,
        "portal/tokens.html",
        {
            "title": "API tokens",
            "form": form,
            "created": created,
            "tokens": ApiToken.objects.filter(user=request.user).select_related(
                "bound_tenant", "bound_project"
            ),
        },
    )


@require_POST
@role_required(Role.OPERATOR, Role.FINANCE, Role.TENANT)
def token_revoke_view(request, pk: int):
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    token_revoke(token=token, by=request.user)
    messages.success(request, f"Token {token.prefix}… revoked.")
    return redirect("tokens")


AUDIT_CSV_HEADER = ["id", "at", "actor", "action", "object_type", "object_id", "before", "after"]


@role_required(Role.OPERATOR)
def audit(request):
    """Who changed which configuration object, when, before and after; a CSV of every entry
    the filters select (before and after as the JSON they are stored as)."""
    entries = audit_list(user=request.user, filters=request.GET)
    if request.GET.get("format") == "csv":
        return list_csv(
            name="audit-log", header=AUDIT_CSV_HEADER, rows=map(_audit_csv, entries.iterator())
        )
    page = pager_page(request, entries)
    page.object_list = audit_tenants_named(page.object_list)
    return render(
        request,
        "portal/audit.html",
        {
            "title": "Audit log",
            "page": page,
            "csv_query": export_query(request),
        },
    )


def _audit_csv(entry) -> tuple:
    """An audit entry as its CSV writes it (AUDIT_CSV_HEADER): before and after as JSON."""
    before, after = (
        "" if value is None else json.dumps(value, sort_keys=True)
        for value in (entry.before, entry.after)
    )
    actor = entry.actor.username if entry.actor else "system"
    return (entry.pk, entry.at.isoformat(), actor, entry.action, entry.object_type,
            entry.object_id, before, after)  # fmt: skip


def page_not_found(request, exception=None):
    """404: JSON under /api/, else a page in the portal's shell."""
    if request.path.startswith("/api/"):
        return api_not_found(request, exception)
    return render(request, "404.html", {"title": "Not found"}, status=404)


def permission_denied(request, exception=None):
    """403: JSON under /api/, else a page saying whose it is to grant."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"errors": [{"field": "", "message": "your role may not do this"}]}, status=403
        )
    return render(request, "403.html", {"title": "Not allowed"}, status=403)


def server_error(request):
    """500: JSON under /api/, else a plain page (no database, no shell: it may be the cause)."""
    if request.path.startswith("/api/"):
        return api_server_error(request)
    return HttpResponseServerError(render_to_string("500.html"))
