"""A plugin's settings as typed form fields, made from the settings schema the plugin publishes
(`PluginSpec.settings_schema`): a number with its bounds, a choice per enum value, a checkbox for a boolean; and the
submitted fields back as the `extra` object the service checks."""

import json
from collections.abc import Mapping
from typing import Any

from django.http import QueryDict

FIELD_PREFIX = "setting-"
# A plugin that publishes no schema takes any JSON object: its settings are one JSON field under this key.
AS_JSON = "json"
NOT_AN_OBJECT = 'enter a JSON object, e.g. {"key": 1}'


class SettingsFormError(Exception):
    """Fields that are not even of their type (`{"max_moves": "enter a whole number"}`), before the service sees them."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("invalid settings form")
        self.errors = errors


def setting_fields(schema: Mapping[str, Any] | None, extra: Mapping[str, Any], *, submitted: Mapping[str, str] | None = None,
                   errors: Mapping[str, str] | None = None,
                   choice_labels: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One field per setting, in the schema's order, holding what was submitted (after a refusal) or the saved value;
    a choice reads as `choice_labels` words it, else as its value."""
    submitted, errors, choice_labels = submitted or {}, errors or {}, choice_labels or {}
    if schema is None:
        if not extra and not errors:
            return []
        return [{"key": AS_JSON, "input": FIELD_PREFIX + AS_JSON, "widget": "json", "description": "a JSON object",
                 "error": errors.get(AS_JSON, ""), "value": submitted.get(AS_JSON, json.dumps(dict(extra)))}]
    fields = []
    for key, setting in schema.get("properties", {}).items():
        saved = extra.get(key, setting.get("default"))
        value = submitted.get(key, saved)
        field: dict[str, Any] = {"key": key, "input": FIELD_PREFIX + key, "description": setting.get("description", ""),
                                 "error": errors.get(key, ""), "value": "" if value is None else value}
        if "enum" in setting:
            field.update(widget="select", choices=[(str(choice), choice_labels.get(str(choice), str(choice)))
                                                   for choice in setting["enum"]], value=str(value))
        elif setting["type"] == "boolean":
            field.update(widget="checkbox", value=value in (True, "true"))
        elif setting["type"] in ("integer", "number"):
            field.update(widget="number", minimum=setting.get("minimum"), maximum=setting.get("maximum"),
                         step="1" if setting["type"] == "integer" else "any")
        else:
            field.update(widget="text")
        fields.append(field)
    return fields


def submitted_settings(schema: Mapping[str, Any] | None, post: QueryDict) -> tuple[dict[str, str], dict[str, Any]]:
    """The fields as typed (to show back) and as `extra`; a field not of its type raises SettingsFormError. Bounds and
    choices are left to the service, which refuses naming the setting (`extra.<key>`)."""
    if schema is None:
        raw = post.get(FIELD_PREFIX + AS_JSON, "").strip()
        try:
            extra = json.loads(raw)
        except ValueError:
            extra = None
        if not isinstance(extra, dict):
            raise SettingsFormError({AS_JSON: NOT_AN_OBJECT})
        return {AS_JSON: raw}, extra
    typed, extra, errors = {}, {}, {}
    for key, setting in schema.get("properties", {}).items():
        name = FIELD_PREFIX + key
        if setting["type"] == "boolean":
            extra[key] = post.get(name) == "true"
            typed[key] = "true" if extra[key] else ""
            continue
        if name not in post:
            continue
        raw = typed[key] = post.get(name, "").strip()
        if setting["type"] == "integer" and "enum" not in setting:
            try:
                extra[key] = int(raw)
            except ValueError:
                errors[key] = "enter a whole number"
        elif setting["type"] == "number" and "enum" not in setting:
            try:
                extra[key] = float(raw) if any(mark in raw for mark in ".eE") else int(raw)
            except ValueError:
                errors[key] = "enter a number"
        else:
            extra[key] = _enum_value(setting, raw)
    if errors:
        raise SettingsFormError(errors) from None
    return typed, extra


def _enum_value(setting: Mapping[str, Any], raw: str) -> Any:
    """A choice as the schema spells it (an enum of numbers gets its number back)."""
    return next((choice for choice in setting.get("enum", []) if str(choice) == raw), raw)
