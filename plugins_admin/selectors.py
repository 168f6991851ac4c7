"""Reads for the plugins page and API: the plugin set as the scheduler runs it and its history."""

from importlib import import_module
from typing import Any

from django.db.models import QuerySet

from plugins_admin.models import PluginChange
from scheduling.framework.registry import PluginSpec
from scheduling.plugins.queue_sort import NAME as QUEUE_SORT_NAME, ORDER_DESCRIPTIONS, PRIORITY
from scheduling.selectors import current_plugin_set, current_plugin_settings, plugin_specs

# Why the page and the API show a switch that cannot be turned off.
ALWAYS_ON_REASON = ("Always on: the scheduler needs it for every task (a filter without which a task could land on a "
                    "node that cannot hold it, or the queue order); its settings can still be changed.")


def scheduler_plugins() -> dict[str, Any]:
    """`GET /api/v1/scheduler/plugins`: {filters, scorers: [{name, weight}], preempt_stage}."""
    return current_plugin_set().describe()


def plugin_listing() -> list[dict[str, Any]]:
    registry = plugin_specs()
    listing = []
    for setting in current_plugin_settings(registry):
        spec = registry[setting.name]
        listing.append({
            "name": setting.name,
            "enabled": setting.enabled,
            "weight": setting.weight,
            "extra": setting.extra,
            "locked": spec.always_on,
            "locked_reason": ALWAYS_ON_REASON if spec.always_on else "",
            "exclusive_with": list(spec.exclusive_with),
            "kinds": sorted(spec.kinds),
            "scores": spec.is_scorer,
            "description": plugin_description(spec),
            "in_force": (f"Order in force: {setting.extra.get('order', PRIORITY)} — "
                         f"{ORDER_DESCRIPTIONS[setting.extra.get('order', PRIORITY)]}."
                         if setting.name == QUEUE_SORT_NAME else ""),
        })
    return listing


def plugin_description(spec: PluginSpec) -> str:
    description = (spec.description or spec.factory.__doc__
                   or getattr(import_module(spec.factory.__module__), "__doc__", None) or "")
    return " ".join(description.strip().split("\n\n")[0].split())


def plugin_history(*, limit: int = 20) -> QuerySet[PluginChange]:
    return PluginChange.objects.select_related("actor").order_by("-at", "-id")[:limit]


def plugin_changes_since(since) -> list[dict]:
    """The plugin changes since `since`, oldest first, as {at, text} for the dashboard's history markers."""
    changes = PluginChange.objects.filter(at__gte=since).select_related("actor").order_by("at", "id")[:200]
    return [{"at": change.at,
             "text": f"{change.plugin}: " + ", ".join(f"{key} {change.before.get(key)} → {change.after.get(key)}"
                                                      for key in sorted(set(change.before) | set(change.after))
                                                      if change.before.get(key) != change.after.get(key))
                     + (f" (by {change.actor.username})" if change.actor else "")}
            for change in changes]
