from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from heteroflow_site.parsers import MAX_JSON_NUMBER
from heteroflow_site.query_parameters import bound_query_parameters, with_integer_bounds
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

    def _map_basic_serializer(self, serializer, direction):
        """A request body states the rules across its fields that its serializer enforces (`minProperties`, `oneOf`
        variants) through the serializer's own `request_schema(schema)`, next to the rules themselves."""
        schema = super()._map_basic_serializer(serializer, direction)
        refine = getattr(serializer, "request_schema", None)
        return refine(schema) if direction == "request" and refine is not None else schema

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


# Free-form JSON in a request body (a plugin's `extra`): any value, but text PostgreSQL can store, keys included, as
# heteroflow_site.parsers has it.
STORABLE_JSON = "StorableJSON"
_STORABLE_JSON_REF = {"$ref": f"#/components/schemas/{STORABLE_JSON}"}
_STORABLE_KEYS = {"type": "string", "pattern": STORABLE_PATTERN}


def _types(schema: dict) -> set[str]:
    kind = schema.get("type", [])
    return {kind} if isinstance(kind, str) else set(kind)


def _resolved(schema: dict, schemas: dict) -> dict:
    reference = schema.get("$ref", "")
    return schemas.get(reference.rsplit("/", 1)[-1], {}) if reference else schema


def close_request_bodies(result, generator, request, public):
    """drf-spectacular post-processing hook: request bodies say exactly what the API takes. Objects refuse unknown
    fields (StrictSerializer, and windows in the group service): `additionalProperties: false`, nested objects
    included; integers that declare no bounds are within int32, as the `integer` columns behind them (and ids) are,
    other numbers within ±2^53 as the parser takes them; free-form objects hold text the database can store only."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    seen: set[str] = set()

    def close(schema: dict) -> None:
        reference = schema.get("$ref", "")
        if reference:
            name = reference.rsplit("/", 1)[-1]
            if name not in seen and name in schemas:
                seen.add(name)
                close(schemas[name])
            return
        for variant in schema.get("oneOf", []) + schema.get("anyOf", []) + schema.get("allOf", []):
            close(variant)
        kinds = _types(schema)
        if "integer" in kinds and "enum" not in schema:
            schema.update(with_integer_bounds({**schema, "type": "integer"}), type=schema["type"])
        elif "number" in kinds and "enum" not in schema:
            schema.setdefault("minimum", -MAX_JSON_NUMBER)
            schema.setdefault("maximum", MAX_JSON_NUMBER)
        if "object" in kinds and "properties" in schema:
            schema["additionalProperties"] = False
            for value in schema["properties"].values():
                close(value)
        elif "object" in kinds:
            schema.setdefault("propertyNames", _STORABLE_KEYS)
            if schema.get("additionalProperties", True) in ({}, True):
                schema["additionalProperties"] = _STORABLE_JSON_REF
            else:
                close(schema["additionalProperties"])
        if "array" in kinds and isinstance(schema.get("items"), dict):
            close(schema["items"])

    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            body = operation.get("requestBody", {})
            for media in body.get("content", {}).values():
                close(media.get("schema", {}))
                # A body that must hold something must be sent.
                if _resolved(media.get("schema", {}), schemas).get("minProperties"):
                    body["required"] = True
    schemas[STORABLE_JSON] = {
        "description": "Any JSON value whose text (keys included) has no NUL character",
        "anyOf": [
            {"type": ["null", "boolean"]},
            {"type": "number", "minimum": -MAX_JSON_NUMBER, "maximum": MAX_JSON_NUMBER},
            {"type": "string", "pattern": STORABLE_PATTERN},
            {"type": "array", "items": _STORABLE_JSON_REF},
            {"type": "object", "propertyNames": _STORABLE_KEYS, "additionalProperties": _STORABLE_JSON_REF},
        ],
    }
    return result


def any_value_without_null_variant(result, generator, request, public):
    """drf-spectacular post-processing hook: a nullable field of any type (a JSONField) is `{}` in OpenAPI 3.1, not
    `oneOf: [{}, {type: null}]`, which a null matches twice and so fails."""

    def simplify(node):
        if isinstance(node, dict):
            variants = node.get("oneOf")
            if isinstance(variants, list) and {} in variants and {"type": "null"} in variants and len(variants) == 2:
                del node["oneOf"]
            for value in node.values():
                simplify(value)
        elif isinstance(node, list):
            for value in node:
                simplify(value)

    simplify(result)
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
