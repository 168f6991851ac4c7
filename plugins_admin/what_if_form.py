"""The plugin page's "Preview a change" form: its fields as the plugin API's list of changes, refusals back
beside the field they name, and a preview as the rows and bars the page shows."""

import json
from collections.abc import Callable
from typing import Any, TypeVar

from django.http import QueryDict
from rest_framework.exceptions import ValidationError

from heteroflow_site.errors import DomainError
from plugins_admin.change_input import PLUGIN_ACTIONS, plugin_change_requests
from plugins_admin.rules import PluginChangeRequest
from scheduling.selectors import task_rows

T = TypeVar("T")
# Bars of the page: at most this many nodes each, the most used first.
BAR_NODES = 12
# preempt's one setting has a field of its own; other plugins' settings are a JSON object, as on the plugin table.
PREEMPT = "preempt"
FIELDS = ("action", "weight", "preempt_stage", "settings")
NOT_AN_OBJECT = 'enter a JSON object, e.g. {"cpu_weight": 1}'


class PreviewFormError(Exception):
    """The form's refusals, by plugin row and field: `{"binpack": {"weight": "..."}}`."""

    def __init__(self, errors: dict[str, dict[str, str]]):
        super().__init__("invalid preview form")
        self.errors = errors


def submitted_changes(post: QueryDict, plugin_names: list[str]) -> tuple[dict[str, dict[str, str]], list[dict]]:
    """What the form asks, per plugin (`{name: {action, weight, preempt_stage, settings}}`, to show back), and as
    the API's body: one entry per plugin with a change (settings that are not JSON stay text, refused later)."""
    submitted, entries = {}, []
    for name in plugin_names:
        fields = {key: post.get(f"{key}-{name}", "").strip() for key in FIELDS}
        submitted[name] = fields
        entry: dict[str, Any] = {"name": name}
        if fields["action"] in PLUGIN_ACTIONS:
            entry["action"] = fields["action"]
        if fields["weight"]:
            entry["weight"] = int(fields["weight"]) if fields["weight"].isdigit() else fields["weight"]
        if fields["preempt_stage"]:
            entry["extra"] = {"preempt_stage": fields["preempt_stage"]}
        elif fields["settings"]:
            entry["extra"] = _json_or_text(fields["settings"])
        if len(entry) > 1:
            entries.append(entry)
    return submitted, entries


def with_changes(post: QueryDict, plugin_names: list[str], act: Callable[[list[PluginChangeRequest]], T]) -> T:
    """`act` on the form's changes, checked as the API checks them (the body's shapes, then the plugin rules);
    a refusal is a PreviewFormError naming the plugin row and field."""
    _, entries = submitted_changes(post, plugin_names)
    not_objects = {entry["name"]: {"settings": NOT_AN_OBJECT} for entry in entries
                   if not isinstance(entry.get("extra", {}), dict)}
    if not_objects:
        raise PreviewFormError(not_objects)
    try:
        return act(plugin_change_requests(entries))
    except ValidationError as exc:
        raise PreviewFormError(_row_errors(exc.detail, entries)) from None
    except DomainError as exc:
        raise PreviewFormError(_row_errors({exc.field or "detail": [exc.message]}, entries)) from None


def _row_errors(detail: dict, entries: list[dict]) -> dict[str, dict[str, str]]:
    errors: dict[str, dict[str, str]] = {}
    for key, messages in detail.items():
        position, _, field = str(key).partition("].")
        field = field.partition(".")[0]  # a setting's refusal (`extra.cpu_weight`) goes beside the settings field
        index = position.removeprefix("[").rstrip("]")
        name = entries[int(index)]["name"] if index.isdigit() and int(index) < len(entries) else ""
        field = {"enabled": "action", "extra": "preempt_stage" if name == PREEMPT else "settings",
                 "": "action"}.get(field, field)
        message = messages[0] if isinstance(messages, list) else messages
        errors.setdefault(name or "form", {})[field] = str(message)
    return errors


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def form_rows(plugins: list[dict[str, Any]], *, submitted: dict[str, dict[str, str]],
              errors: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """The plugin listing with what the form asked of each plugin (`asked`) and its refusals (`refused`)."""
    return [{**plugin, "asked": submitted.get(plugin["name"], {}), "refused": errors.get(plugin["name"], {})}
            for plugin in plugins]


def preview_view(preview: dict[str, Any]) -> dict[str, Any]:
    """The preview as the page shows it: the moved tasks by name, the two allocation bars, the whole-node slots."""
    moved_ids = [move["task"] for move in preview["moved"]]
    names = dict(task_rows(task_ids=[*moved_ids, *preview["newly_placed"], *preview["newly_unplaced"]],
                           tenant_id=None).values_list("id", "name"))
    return {
        "considered": preview["considered"],
        "gangs": preview["gangs"],
        "not_previewed": preview["not_previewed"],
        "moved": [{**move, "name": names.get(move["task"], "")} for move in preview["moved"]],
        "newly_placed": [{"task": task_id, "name": names.get(task_id, "")} for task_id in preview["newly_placed"]],
        "newly_unplaced": [{"task": task_id, "name": names.get(task_id, "")}
                           for task_id in preview["newly_unplaced"]],
        "bars": [_bar("Now", preview["current"]), _bar("Proposed", preview["proposed"])],
        "whole_nodes": {side: preview["fragmentation"][side]["usable"][8] for side in ("current", "proposed")},
    }


def _bar(label: str, side: dict[str, Any]) -> dict[str, Any]:
    """One side's allocation: the cluster's percentage, and a segment per node the head of the queue lands on."""
    nodes = sorted(side["allocation"]["nodes"], key=lambda node: (-node["gpu_used"], node["node"]))[:BAR_NODES]
    return {
        "label": label,
        "percent": side["allocation"]["percent"],
        "placed": side["placed"],
        "nodes": [{**node, "fill": round(100 * node["gpu_used"] / node["gpu_total"]) if node["gpu_total"] else 0}
                  for node in sorted(nodes, key=lambda node: node["node"])],
    }
