"""Every response under /api/ that is an error is JSON a client can read: `{"code", "message", "field"?, "errors"?}`.

`code` is machine-readable (`invalid`, `not_found`, `method_not_allowed`, `not_authenticated`, `permission_denied`,
`throttled`, `server_error`, …); `field` names the first field at fault and `errors` lists every field's messages.
Pages keep their HTML error pages.
"""

import logging

from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import Http404, JsonResponse
from django.views import defaults
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from heteroflow_site.errors import DomainError, NotAllowed, NotFoundReference
from heteroflow_site.serializers import UNNAMED, flat_errors

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"


def _first_code(codes) -> str:
    """The code of the first error in DRF's nested `get_codes()` (the same order as the messages)."""
    while isinstance(codes, (dict, list)) and codes:
        codes = next(iter(codes.values())) if isinstance(codes, dict) else codes[0]
    return codes if isinstance(codes, str) and codes else "invalid"


def _codes(codes):
    """Every code in DRF's nested `get_codes()`."""
    if isinstance(codes, dict):
        for value in codes.values():
            yield from _codes(value)
    elif isinstance(codes, list):
        for value in codes:
            yield from _codes(value)
    else:
        yield codes


# Validation errors that refuse a request the schema allows, by their code: DRF's for an id naming no row (a related
# field), as NotFoundReference; a serializer's rule across fields, as NotAllowed.
REFUSALS_BY_CODE = {"does_not_exist": (404, NotFoundReference.code), NotAllowed.code: (403, NotAllowed.code)}


def error_body(code: str, message: str, *, field: str | None = None, errors: dict | None = None) -> dict:
    body = {"code": code, "message": message}
    if field:
        body["field"] = field
    if errors:
        body["errors"] = errors
    return body


def _validation_body(exc: exceptions.ValidationError) -> dict:
    errors = flat_errors(exc.detail)
    unnamed = errors.pop(UNNAMED, [])
    field = next(iter(errors), None)
    message = f"{field}: {errors[field][0]}" if field else (unnamed[0] if unnamed else "invalid input")
    return error_body(_first_code(exc.get_codes()), message, field=field, errors=errors or None)


def exception_handler(exc, context):
    """DRF's handler, with domain refusals as 400s naming their field, every body in the one shape, and an unexpected
    exception a logged JSON 500 rather than an HTML page."""
    if isinstance(exc, DomainError) and exc.status != 400:
        set_rollback()
        return Response(error_body(exc.code, exc.message, field=exc.field,
                                   errors={exc.field: [exc.message]} if exc.field else None), status=exc.status)
    if isinstance(exc, DomainError):
        exc = exceptions.ValidationError({exc.field: [exc.message]} if exc.field else [exc.message])
    if isinstance(exc, SuspiciousOperation):
        # Too many form fields, a body over the upload limit…: the client's fault, as Django's own views say.
        exc = exceptions.ParseError(str(exc) or "malformed request")
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = drf_exception_handler(exc, context)
    if response is None:
        logger.exception("unhandled error in %s", context.get("view").__class__.__name__, exc_info=exc)
        set_rollback()
        return Response(error_body("server_error", "internal server error"), status=500)
    if isinstance(exc, exceptions.ValidationError):
        response.data = _validation_body(exc)
        codes = set(_codes(exc.get_codes()))
        if len(codes) == 1 and (refusal := REFUSALS_BY_CODE.get(codes.pop())):
            response.status_code, response.data["code"] = refusal
    else:
        detail = response.data.get("detail", "") if isinstance(response.data, dict) else response.data
        code = exc.get_codes() if isinstance(exc, exceptions.APIException) else "error"
        if not isinstance(code, str):
            code = exc.default_code
        response.data = error_body(code, str(detail))
    return response


def _is_api(request) -> bool:
    return request.path.startswith(API_PREFIX)


def page_not_found(request, exception):
    if _is_api(request):
        return JsonResponse(error_body("not_found", f"no API route {request.path}"), status=404)
    return defaults.page_not_found(request, exception)


def permission_denied(request, exception):
    if _is_api(request):
        return JsonResponse(error_body("permission_denied", str(exception) or "permission denied"), status=403)
    return defaults.permission_denied(request, exception)


def bad_request(request, exception):
    if _is_api(request):
        return JsonResponse(error_body("bad_request", "bad request"), status=400)
    return defaults.bad_request(request, exception)


def server_error(request):
    if _is_api(request):
        return JsonResponse(error_body("server_error", "internal server error"), status=500)
    return defaults.server_error(request)


ERROR_STATUSES = {
    # A refusal of a well-formed request is a 403, 404 or 409 (heteroflow_site.errors), never a 400.
    "400": "Invalid input: a request the schema does not allow (code `unstorable_text`: text with a lone UTF-16 "
           "surrogate, which the database cannot store and no pattern describes in every regex dialect)",
    "401": "Not authenticated",
    "403": "Not allowed: the caller's rights, or a rule refusing this well-formed request (code `not_allowed`, "
           "`field` naming it)",
    "404": "Not found: the path, or an id the body names (code `not_found`, `field` naming it)",
    "405": "Method not allowed",
    "429": "Too many requests",
}

WRITES = {"post", "put", "patch", "delete"}
# A write may clash with what exists now, whichever service it reaches (heteroflow_site.errors.Conflict).
WRITE_ERROR_STATUSES = {"409": "Conflict: the request clashes with what exists now (a name taken, a task already "
                                "ended…; code `conflict` or the refusal's own, `field` naming it)"}


def add_error_responses(result, generator, request, public):
    """drf-spectacular post-processing hook: every operation documents the error body for the statuses it may answer
    with (unless it declares its own)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["ApiError"] = {
        "type": "object",
        "properties": {
            "code": {"type": "string"},
            "message": {"type": "string"},
            "field": {"type": "string"},
            "errors": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        },
        "required": ["code", "message"],
    }
    reference = {"application/json": {"schema": {"$ref": "#/components/schemas/ApiError"}}}
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            statuses = {**ERROR_STATUSES, **(WRITE_ERROR_STATUSES if method in WRITES else {})}
            for status, description in statuses.items():
                responses.setdefault(status, {"description": description, "content": reference})
            for status, response in responses.items():
                if status.startswith("4") and not response.get("content"):
                    response["content"] = reference
    return result


def refusals(*errors: type[DomainError]) -> dict:
    """The responses of the DomainErrors a view answers with besides 400 (`extend_schema(responses={200: Out,
    **refusals(Conflict)})`): each status documented with the error body."""
    documented: dict = {}
    for error in errors:
        described = documented.get(error.status)
        text = (error.__doc__ or error.code).strip().splitlines()[0]
        documented[error.status] = OpenApiResponse(description=f"{described.description} / {text}" if described
                                                   else text)
    return documented
