"""A plugin's settings (`extra`) as a JSON Schema the plugin declares (`PluginSpec.settings_schema`): the API publishes
it (each plugin's `PUT /api/v1/plugins/{name}` body) and every write checks `extra` against it here, so a setting the
schema allows is accepted and any other is refused naming its key (design §17.1).

The schema is an object of named settings, no others:

    {"type": "object", "additionalProperties": false, "properties": {
        "preempt_stage": {"type": "string", "enum": ["disabled", "scheduled", "running"]},
        "max_moves": {"type": "integer", "minimum": 1, "maximum": 8}}}

Each setting has a `type` (integer, number, string or boolean), and may have an `enum`, `minimum` / `maximum` and a
`description`; a setting left out keeps the plugin's default. That is all the checking understands, so a schema
using anything else is refused when the plugin is registered (`check_settings_schema`) rather than half-checked.
"""

from collections.abc import Mapping
from typing import Any

_TYPES = {
    "integer": ("a whole number", lambda value: isinstance(value, int) and not isinstance(value, bool)),
    "number": ("a number", lambda value: isinstance(value, int | float) and not isinstance(value, bool)),
    "string": ("a string", lambda value: isinstance(value, str)),
    "boolean": ("true or false", lambda value: isinstance(value, bool)),
}
_SETTING_KEYWORDS = frozenset({"type", "enum", "minimum", "maximum", "description", "default"})
_SCHEMA_KEYWORDS = frozenset({"type", "properties", "additionalProperties", "description"})


class SettingError(ValueError):
    """`extra` is not what the plugin's schema allows: `key` names the setting at fault (None: `extra` itself)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def no_settings() -> dict[str, Any]:
    """The schema of a plugin that has no settings."""
    return {"type": "object", "properties": {}, "additionalProperties": False}


def check_settings_schema(plugin: str, schema: Mapping[str, Any]) -> None:
    """Raise ValueError unless `schema` is one `settings_problem` checks in full."""
    if set(schema) - _SCHEMA_KEYWORDS or schema.get("type") != "object" or schema.get("additionalProperties", True):
        raise ValueError(f"plugin {plugin!r}: settings_schema must be an object of named settings "
                         f"(type, properties, additionalProperties: false, description)")
    for key, setting in schema.get("properties", {}).items():
        if set(setting) - _SETTING_KEYWORDS or setting.get("type") not in _TYPES:
            raise ValueError(f"plugin {plugin!r}: setting {key!r} must have a type of {', '.join(_TYPES)} and "
                             f"only {', '.join(sorted(_SETTING_KEYWORDS))}")


def settings_problem(plugin: str, schema: Mapping[str, Any], extra: Any) -> SettingError | None:
    """Why `extra` is not what `schema` allows (the first setting at fault, by name), or None."""
    if not isinstance(extra, Mapping):
        return SettingError("extra must be a JSON object")
    properties = schema.get("properties", {})
    unknown = sorted(set(extra) - set(properties))
    if unknown:
        return SettingError(f"unknown {plugin} setting(s): {', '.join(unknown)}", unknown[0])
    for key in sorted(extra):
        problem = _value_problem(key, properties[key], extra[key])
        if problem:
            return SettingError(problem, key)
    return None


def _value_problem(key: str, setting: Mapping[str, Any], value: Any) -> str:
    noun, is_type = _TYPES[setting["type"]]
    if "enum" in setting:
        if not is_type(value) or value not in setting["enum"]:
            return f"{key} must be one of {'|'.join(map(str, setting['enum']))}, not {value!r}"
        return ""
    low, high = setting.get("minimum"), setting.get("maximum")
    if is_type(value) and (low is None or value >= low) and (high is None or value <= high):
        return ""
    if low is not None and high is not None:
        return f"{key} must be {noun} from {low} to {high}, not {value!r}"
    if low is not None or high is not None:
        return f"{key} must be {noun} {'of at least ' + str(low) if low is not None else 'of at most ' + str(high)}, " \
               f"not {value!r}"
    return f"{key} must be {noun}, not {value!r}"
