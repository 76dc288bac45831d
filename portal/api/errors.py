"""Every API error is JSON: {"errors": [{"index"?, "field", "message"}]}."""

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, DataError
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from portal.errors import FieldError


def flatten(detail: Any, field: str = "") -> list[dict[str, Any]]:
    """Turn DRF's nested error detail into a flat list naming each field (dotted paths)."""
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            name = "" if key in ("non_field_errors", "__all__", "detail") else str(key)
            out += flatten(value, f"{field}.{name}" if field and name else field or name)
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return [{"field": field, "message": str(item)} for item in detail]
        out = []
        for index, item in enumerate(detail):
            out += flatten(item, f"{field}[{index}]" if field else str(index))
        return out
    return [{"field": field, "message": str(detail)}]


def errors_response(errors: list[dict[str, Any]], status_code: int, headers=None) -> Response:
    return Response({"errors": errors}, status=status_code, headers=headers)


class UnsupportedContentType(FieldError):
    """A body of a media type the operation does not read: a 415 naming Content-Type."""

    http_status = 415


def content_type_check(*, request, allowed: tuple[str, ...], expected: str | None = None) -> None:
    """Refuse a body whose media type is not in `allowed` ("": none given); the message says
    `expected`, by default one of `allowed`."""
    content_type = request.content_type.split(";")[0].strip().lower()
    if content_type not in allowed:
        wanted = expected or f"one of {', '.join(allowed)}"
        raise UnsupportedContentType(
            "Content-Type", f"must be {wanted} (got {content_type or 'none'!r})"
        )


def exception_handler(exc, context):
    """Every error of the API in the one JSON shape. A domain exception states its own answer:
    an `http_status` and `api_errors()` (each app's errors, mapped here once, not per view)."""
    if hasattr(exc, "http_status") and hasattr(exc, "api_errors"):
        return errors_response(exc.api_errors(), exc.http_status)
    if isinstance(exc, ProtectedError | RestrictedError):  # a delete others still refer to
        referring = getattr(exc, "protected_objects", None) or exc.restricted_objects
        kinds = ", ".join(sorted({str(obj._meta.verbose_name_plural) for obj in referring}))
        return errors_response(
            [{"field": "", "message": f"still referenced by {kinds}: remove those first"}],
            status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"": exc.messages}
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, RequestDataTooBig):
        return errors_response(
            [{"field": "", "message": f"request body is larger than {_limit()}"}],
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    elif isinstance(exc, RecursionError) and "decoding a JSON" in str(exc):
        # The JSON parser recursed once per nested array or object: a body nested that
        # deeply is the client's error, not the server's.
        exc = exceptions.ParseError("JSON parse error - the body is nested too deeply")
    elif isinstance(exc, DataError) and "NUL (0x00)" in str(exc):
        # PostgreSQL text cannot hold U+0000; the driver refuses it before sending the query,
        # so the connection is intact. A slug, lookup or query parameter carried one.
        exc = exceptions.ValidationError({"": ["text must not contain NUL (U+0000) characters"]})
    elif isinstance(exc, DatabaseError) and _is_unavailable(exc):
        return errors_response(
            [{"field": "", "message": "The database is unavailable; retry shortly."}],
            status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": "30"},
        )
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    response.data = {"errors": flatten(response.data)}
    return response


def _limit() -> str:
    return f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 1024 / 1024:g} MiB"


def _is_unavailable(exc: DatabaseError) -> bool:
    from django.db import InterfaceError, OperationalError

    return isinstance(exc, OperationalError | InterfaceError)


def api_not_found(request, exception=None) -> JsonResponse:
    """An unknown /api/ path: the JSON error shape, not an HTML page."""
    return JsonResponse(
        {"errors": [{"field": "", "message": f"no API operation at {request.path}"}]}, status=404
    )


def api_server_error(request) -> JsonResponse:
    return JsonResponse(
        {"errors": [{"field": "", "message": "the server failed; the error is logged"}]},
        status=500,
    )
