"""Query parameters as the OpenAPI schema declares them, checked in one place.

A view declares its query parameters once, with `@extend_schema(parameters=[OpenApiParameter(...)])`. The schema
publishes them (with int32 bounds on integers that declare none, as PostgreSQL's `integer` columns hold) and
QueryParameterMiddleware checks every request against the very same declaration before the view runs: a value the
schema does not allow (`?tenant=2147483648`, `?limit=0`, `?status=nope`, a missing required one) is a 400 naming the
parameter, never a silently ignored filter.
"""

import re
import threading
from types import SimpleNamespace

from django.http import JsonResponse
from django.urls import Resolver404, resolve
from drf_spectacular.utils import OpenApiParameter

from heteroflow_site.api_errors import error_body
from heteroflow_site.middleware import Middleware

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
_INTEGER_TEXT = re.compile(r"-?[0-9]+")
_NUMBER_TEXT = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_BOOLEAN_TEXT = {"true": True, "false": False}


def with_integer_bounds(schema: dict) -> dict:
    """An integer parameter's schema with int32 bounds where it declares none (also inside an array's items)."""
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        return {**schema, "items": with_integer_bounds(schema["items"])}
    if schema.get("type") != "integer":
        return schema
    return {"minimum": INT32_MIN, "maximum": INT32_MAX, **schema}


def bound_query_parameters(parameters: dict) -> dict:
    """drf-spectacular's processed parameters ({(name, location): parameter}) with bounded integers in the query."""
    return {key: ({**parameter, "schema": with_integer_bounds(parameter["schema"])}
                  if parameter and parameter["in"] == OpenApiParameter.QUERY else parameter)
            for key, parameter in parameters.items()}


def value_error(schema: dict, text: str) -> str | None:
    """Why the query text `text` is not a value of `schema`, or None."""
    kind = schema.get("type", "string")
    value: object = text
    if kind == "integer":
        if not _INTEGER_TEXT.fullmatch(text):
            return "must be a whole number"
        value = int(text)
    elif kind == "number":
        if not _NUMBER_TEXT.fullmatch(text):
            return "must be a number"
        value = float(text)
    elif kind == "boolean":
        if text not in _BOOLEAN_TEXT:
            return "must be true or false"
        value = _BOOLEAN_TEXT[text]
    if "enum" in schema and value not in schema["enum"]:
        return "must be one of " + ", ".join(str(choice) for choice in schema["enum"])
    if "minimum" in schema and value < schema["minimum"]:
        return f"must be at least {schema['minimum']}"
    if "maximum" in schema and value > schema["maximum"]:
        return f"must be at most {schema['maximum']}"
    if kind == "string":
        if len(text) < schema.get("minLength", 0):
            return f"must be at least {schema['minLength']} characters"
        if "maxLength" in schema and len(text) > schema["maxLength"]:
            return f"must be at most {schema['maxLength']} characters"
        if "pattern" in schema and not re.search(schema["pattern"], text):
            return f"must match {schema['pattern']}"
    return None


def query_errors(parameters: list[dict], query) -> dict[str, list[str]]:
    """The declared query parameters' errors in `query` (a QueryDict), by parameter name."""
    errors: dict[str, list[str]] = {}
    for parameter in parameters:
        name, schema = parameter["name"], parameter["schema"]
        values = query.getlist(name)
        if not values and parameter.get("required"):
            errors[name] = ["this parameter is required"]
        if schema.get("type") == "array":
            values = [item for value in values for item in value.split(",")]
            schema = schema.get("items", {})
        for text in values:
            error = value_error(schema, text)
            if error:
                errors.setdefault(name, []).append(error)
                break
    return errors


_declared: dict[tuple[type, str], list[dict]] = {}
# drf-spectacular imports its extensions' target classes on first use, and two threads doing so at once make one of
# them fail (a 500 on the first concurrent requests of a web process): the first declaration of each view is made
# by one thread at a time.
_declaring = threading.Lock()


def declared_query_parameters(view_class, method: str) -> list[dict]:
    """The query parameters the schema publishes for `method` of `view_class` (as the schema generator builds them),
    worked out once per process."""
    key = (view_class, method)
    declared = _declared.get(key)
    if declared is None:
        with _declaring:
            declared = _declared.get(key)
            if declared is None:
                declared = _declared[key] = _declare(view_class, method)
    return declared


def _declare(view_class, method: str) -> list[dict]:
    handler = getattr(view_class, method.lower(), None)
    schema_class = getattr(handler, "kwargs", {}).get("schema")
    if schema_class is None:
        return []
    schema = schema_class()
    # The generator binds the schema to a view instance; the declaration needs no request. Its renderers give the
    # `format` parameter the schema publishes for views with more than one.
    schema.view = SimpleNamespace(determine_version=lambda *args, **kwargs: (None, None), request=None, kwargs={},
                                  get_renderers=lambda: [renderer() for renderer in view_class.renderer_classes])
    schema.method = method.upper()
    declared = [*schema._process_override_parameters().values(), *schema._get_format_parameters()]
    return [parameter for parameter in declared if parameter and parameter["in"] == OpenApiParameter.QUERY]


class QueryParameterMiddleware(Middleware):
    """A request whose query parameters the schema does not allow is a 400 naming them; the view never runs."""

    def handle(self, request):
        return _refusal(request) or self.get_response(request)


def _refusal(request) -> JsonResponse | None:
    if not request.GET:
        return None
    try:
        view_class = getattr(resolve(request.path_info).func, "cls", None)
    except Resolver404:
        return None
    if view_class is None:
        return None
    errors = query_errors(declared_query_parameters(view_class, request.method), request.GET)
    if not errors:
        return None
    field = next(iter(errors))
    return JsonResponse(error_body("invalid", f"{field}: {errors[field][0]}", field=field, errors=errors), status=400)
