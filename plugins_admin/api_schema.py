"""What the published API schema says of each plugin's settings (design §17.1): a setting the schema allows is
accepted, any other is a 400 naming it.

`PUT /api/v1/plugins/{name}` takes, per plugin, its own `extra` (`PluginSpec.settings_schema`). A body's schema
cannot depend on a path parameter, so the template gives way to a path per registered plugin,
`/api/v1/plugins/preempt`, …, whose body states that plugin's settings (a name no plugin has is a 404, as any
path the schema does not list). A list of changes names the plugin in each entry, so there the entry's schema says
it with `if`/`then` (`change_rules`).
"""

import copy
from typing import Any

from scheduling.selectors import plugin_specs

PLUGIN_PATH = "/api/v1/plugins/{name}"
SETTINGS_INPUT = "PluginSettingsInput"


def change_rules(schema: dict) -> dict:
    """A change entry's schema (`{name, action?, weight?, extra?}`) with, per plugin that declares its settings,
    `if name is it then extra is its settings`."""
    rules = [{"if": {"properties": {"name": {"const": name}}, "required": ["name"]},
              "then": {"properties": {"extra": copy.deepcopy(dict(spec.settings_schema))}}}
             for name, spec in plugin_specs().items() if spec.settings_schema is not None]
    return {**schema, "allOf": [*schema.get("allOf", []), *rules]} if rules else schema


def publish_plugin_settings(result: dict, generator: Any, request: Any, public: bool) -> dict:
    """drf-spectacular post-processing hook: the template's operations on a path per registered plugin, its PUT
    body with the plugin's own settings (`PluginSettingsInput.<name>`)."""
    paths = result.get("paths", {})
    template = paths.get(PLUGIN_PATH)
    schemas = result.get("components", {}).get("schemas", {})
    if template is None or SETTINGS_INPUT not in schemas:
        return result
    registry = plugin_specs()
    concrete = {}
    for name, spec in registry.items():
        body = copy.deepcopy(schemas[SETTINGS_INPUT])
        body["description"] = f"`PUT /api/v1/plugins/{name}`: a new weight and/or new settings of {name}."
        if spec.settings_schema is not None:
            body["properties"]["extra"] = copy.deepcopy(dict(spec.settings_schema))
        component = f"{SETTINGS_INPUT}.{name}"
        schemas[component] = body
        item = copy.deepcopy(template)
        for operation in item.values():
            operation["operationId"] = f"{operation['operationId']}_{name.replace('-', '_')}"
            operation["parameters"] = [parameter for parameter in operation.get("parameters", [])
                                       if not (parameter["in"] == "path" and parameter["name"] == "name")]
        for media in item.get("put", {}).get("requestBody", {}).get("content", {}).values():
            media["schema"] = {"$ref": f"#/components/schemas/{component}"}
        concrete[PLUGIN_PATH.replace("{name}", name)] = item
    del schemas[SETTINGS_INPUT]
    # Each plugin's path where the template was, as the API's reference lists them.
    ordered = {}
    for path, item in paths.items():
        ordered.update(concrete if path == PLUGIN_PATH else {path: item})
    result["paths"] = ordered
    return result
