from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from heteroflow_site.query_parameters import bound_query_parameters
from heteroflow_site.validation import STORABLE_PATTERN


class NestedSerializerAutoSchema(AutoSchema):
    """Names nested `SomeApi.InputSerializer` classes after their API, so that components never collide; integer
    query parameters carry int32 bounds unless they declare their own (heteroflow_site.query_parameters checks
    requests against these very parameters)."""

    def _process_override_parameters(self, direction="request"):
        return bound_query_parameters(super()._process_override_parameters(direction))

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        """A request's text field that takes no blank says so (`minLength: 1`)."""
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if (direction == "request" and isinstance(field, serializers.CharField) and not field.allow_blank
                and schema.get("type") == "string"):
            schema["minLength"] = max(schema.get("minLength", 0), 1)
        return schema

    def _insert_field_validators(self, field, schema):
        """Text says what the database cannot store (the NUL character, lone surrogates: heteroflow_site.parsers
        refuses them in every body) where no pattern of the field's own rules it out already. After drf-spectacular's
        own validators, whose pattern comes first, and so that a field taking blanks stays a plain string."""
        super()._insert_field_validators(field, schema)
        if isinstance(field, serializers.CharField) and schema.get("type") == "string":
            schema.setdefault("pattern", STORABLE_PATTERN)

    def _get_serializer_name(self, serializer, direction, bypass_extensions=False):
        name = super()._get_serializer_name(serializer, direction, bypass_extensions)
        qualname = type(serializer).__qualname__
        if "." in qualname and not getattr(getattr(serializer, "Meta", None), "ref_name", None):
            outer = qualname.split(".")[-2]
            return f"{outer}{name}"
        return name


# Where a created resource's id goes next: (creating operation, response field) → the path parameter it fills.
_CREATED_IDS = {
    ("/api/v1/tasks", "post"): ("id", "task_id"),
    ("/api/v1/task-groups", "post"): ("id", "group_id"),
    ("/api/v1/tenants", "post"): ("id", "tenant_id"),
    ("/api/v1/share-groups", "post"): ("id", "group_id"),
    ("/api/v1/agent/register", "post"): ("node_id", "node_id"),
}
# Paths that take the id, when they do not start with the creating path.
_CONSUMER_PREFIXES = {"/api/v1/agent/register": "/api/v1/nodes"}


def close_request_bodies(result, generator, request, public):
    """drf-spectacular post-processing hook: request bodies refuse unknown fields (StrictSerializer, and windows in
    the group service), so their schemas say `additionalProperties: false`, nested objects included."""
    schemas = result.get("components", {}).get("schemas", {})
    seen: set[str] = set()

    def close(schema: dict) -> None:
        reference = schema.get("$ref", "")
        if reference:
            name = reference.rsplit("/", 1)[-1]
            if name not in seen and name in schemas:
                seen.add(name)
                close(schemas[name])
            return
        for variant in schema.get("oneOf", []) + schema.get("allOf", []):
            close(variant)
        if schema.get("type") == "object" and "properties" in schema:
            schema["additionalProperties"] = False
            for value in schema["properties"].values():
                close(value)
        if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
            close(schema["items"])

    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for media in operation.get("requestBody", {}).get("content", {}).values():
                close(media.get("schema", {}))
    return result


def add_links(result, generator, request, public):
    """drf-spectacular post-processing hook: OpenAPI links from each create operation to the operations on what it
    created (`POST /tasks` → `GET /tasks/{task_id}`, `POST /tasks/{task_id}/stop`, …), so clients and stateful
    fuzzers can follow them."""
    paths = result.get("paths", {})
    for (source_path, method), (field, parameter) in _CREATED_IDS.items():
        source = paths.get(source_path, {}).get(method)
        if source is None:
            continue
        prefix = _CONSUMER_PREFIXES.get(source_path, source_path) + "/{" + parameter + "}"
        links = {}
        for path, operations in paths.items():
            if path != prefix and not path.startswith(prefix + "/"):
                continue
            for target_method, target in operations.items():
                name = target["operationId"]
                links[name] = {"operationId": name, "parameters": {parameter: f"$response.body#/{field}"}}
        success = next(status for status in ("201", "200") if status in source["responses"])
        source["responses"][success]["links"] = links
    return result
