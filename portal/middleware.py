"""Content-Security-Policy, the URL length limit, session absolute timeout, tenant status, a
clear 400 and 503."""

import time

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.core.exceptions import ValidationError
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect, resolve_url
from django.template.loader import render_to_string
from django.utils.cache import add_never_cache_headers, patch_cache_control

from portal.access import user_refusal
from portal.errors import FieldError
from portal.services import audit_record

SESSION_STARTED = "portal_session_started"
SESSION_REFRESHED = "portal_session_refreshed"
SESSION_REFRESH_SECONDS = 60  # the idle timeout restarts at most this often (one write)


class ContentSecurityPolicyMiddleware:
    """settings.CONTENT_SECURITY_POLICY on every response: pages, API, static files and
    error pages (first in MIDDLEWARE, so it wraps all the others); a URL name listed in
    CONTENT_SECURITY_POLICY_BY_URL_NAME gets its own."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        policy = settings.CONTENT_SECURITY_POLICY_BY_URL_NAME.get(
            match.url_name if match else None, settings.CONTENT_SECURITY_POLICY
        )
        response.headers.setdefault("Content-Security-Policy", policy)
        return response


class RequestLimitsMiddleware:
    """A URL longer than settings.MAX_URL_BYTES answers 414 before anything reads it: JSON
    under /api/, a page elsewhere. The server's own limit on the request line is above it
    (gunicorn.conf.py), so the portal, not the server, answers whatever a client sends."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        length = len(request.get_full_path().encode())
        if length <= settings.MAX_URL_BYTES:
            return self.get_response(request)
        message = (
            f"the URL is {length} bytes, longer than the {settings.MAX_URL_BYTES} this portal "
            "reads; narrow the query or send the values in a request body"
        )
        if request.path.startswith("/api/"):
            return JsonResponse({"errors": [{"field": "", "message": message}]}, status=414)
        return HttpResponse(render_to_string("414.html", {"message": message}), status=414)


class SessionTimeoutMiddleware:
    """The two session timeouts. Idle (SESSION_COOKIE_AGE): restarted by activity, written
    at most once per SESSION_REFRESH_SECONDS, so a page view reads the session without
    writing it (the timeout then falls within that much of its length). Absolute
    (SESSION_ABSOLUTE_SECONDS): a user is signed out once the session is that old, however
    active."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            is_authenticated = request.user.is_authenticated
        except (OperationalError, InterfaceError):  # the view answers 503; nothing to check
            return self.get_response(request)
        if is_authenticated:
            session = request.session
            now = int(time.time())
            started = session.setdefault(SESSION_STARTED, now)
            if now - started > settings.SESSION_ABSOLUTE_SECONDS:
                logout(request)
                if request.path.startswith("/api/"):
                    return self.get_response(request)  # answered as unauthenticated
                return redirect(f"{resolve_url(settings.LOGIN_URL)}?next={request.path}")
            if now - session.get(SESSION_REFRESHED, 0) >= SESSION_REFRESH_SECONDS:
                session[SESSION_REFRESHED] = now  # saved, with the expiry moved on
        return self.get_response(request)


class PrivateResponseMiddleware:
    """Nothing answered to a signed-in user is kept by a browser or a shared cache
    (`Cache-Control: no-store, private`): invoices, usage and tokens stay off disk after
    sign-out and out of proxies."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        user = getattr(request, "user", None)
        try:
            signed_in = bool(user and user.is_authenticated)
        except (OperationalError, InterfaceError):
            signed_in = False
        if signed_in:
            add_never_cache_headers(response)
            patch_cache_control(response, private=True)
        return response


class TenantStatusMiddleware:
    """A session of a member whose tenant was suspended or closed ends at the next request,
    page or API (tokens are refused in portal.authentication; sign-in in the login form)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            refusal = user_refusal(request.user) if request.user.is_authenticated else None
        except (OperationalError, InterfaceError):  # the view answers 503
            return self.get_response(request)
        if refusal:
            logout(request)
            if not request.path.startswith("/api/"):
                messages.error(request, refusal)
                return redirect(resolve_url(settings.LOGIN_URL))
        return self.get_response(request)


class BadInputMiddleware:
    """A page given a value it does not know (a filter, a period) answers 400 naming the
    parameter, as the API does, instead of a 500. The API has its own JSON answer."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if request.path.startswith("/api/"):
            return None
        if isinstance(exception, FieldError):
            problems = [f"{exception.field}: {exception.message}"]
            return HttpResponseBadRequest(
                render_to_string("400.html", {"problems": problems}, request=request)
            )
        if isinstance(exception, ValidationError):
            problems = (
                [
                    f"{field}: {' '.join(messages)}"
                    for field, messages in exception.message_dict.items()
                ]
                if hasattr(exception, "error_dict")
                else exception.messages
            )
            return HttpResponseBadRequest(
                render_to_string("400.html", {"problems": problems}, request=request)
            )
        return None


class DatabaseUnavailableMiddleware:
    """Pages answer 503 with Retry-After and a plain explanation, never a stack trace, when
    PostgreSQL is down (the API has its own JSON answer in portal.api.errors)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, OperationalError | InterfaceError):
            # No request context: its processors would query the database again.
            response = HttpResponse(render_to_string("503.html"), status=503)
            response["Retry-After"] = "30"
            return response
        return None


def not_an_export(view):
    """Marks a view whose downloads hold none of the factory's data (the API's schema: the
    same document for everyone, fetched by every load of the API docs page), so that
    ExportAuditMiddleware leaves no audit entry for them."""
    view.not_an_export = True
    return view


class ExportAuditMiddleware:
    """Every download (a response with a Content-Disposition: CSV, XLSX, PDF) leaves an
    audit entry naming who took what, in one place for every present and future export;
    views marked `not_an_export` aside."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        disposition = response.get("Content-Disposition", "")
        match = request.resolver_match
        if match and getattr(match.func, "not_an_export", False):
            return response
        if response.status_code == 200 and disposition and request.user.is_authenticated:
            audit_record(
                actor=request.user,
                action="export",
                object_type=(match.url_name or "") if match else "",
                object_id=disposition.partition("filename=")[2].strip('"')[:128],
                after={"path": request.get_full_path()[:500]},
            )
        return response
