"""Reads of the plugin set: the stored rows (SPEC §1 PluginConfig) merged with the registered plugins."""

from importlib import import_module
from typing import Any

from django.db.models import QuerySet

from plugins_admin.models import NotificationChannel, PluginChange, PluginConfig
from plugins_admin.notifications import TASK_EVENTS
from scheduling.framework.registry import PluginSet, PluginSetting, PluginSpec, Registry, build_plugin_set
from scheduling.plugins import default_registry

# Why the page and the API show a switch that cannot be turned off (SPEC §6).
ALWAYS_ON_REASON = "Always on: without it the scheduler could place a task on a node that cannot hold it."

def plugin_specs() -> Registry:
    """Every registered plugin by name, built-ins first, in registry order."""
    return default_registry()


def default_setting(spec: PluginSpec) -> PluginSetting:
    return PluginSetting(name=spec.name, enabled=spec.default.enabled, weight=spec.default.weight,
                         extra=dict(spec.default.extra))


def current_plugin_settings(registry: Registry | None = None) -> list[PluginSetting]:
    """One setting per registered plugin, from its row (one query) or, without a row, from its defaults."""
    registry = registry if registry is not None else plugin_specs()
    rows = {row.name: row for row in PluginConfig.objects.all()}
    settings = []
    for spec in registry.values():
        row = rows.get(spec.name)
        if row is None:
            settings.append(default_setting(spec))
            continue
        # A forced filter stays on whatever a row says: no path may disable it (SPEC §6).
        settings.append(PluginSetting(name=row.name, enabled=row.enabled or spec.always_on, weight=row.weight,
                                      extra=dict(row.extra)))
    return settings


def current_plugin_set() -> PluginSet:
    """The plugin set the scheduler runs with; each cycle loads it through here, so a change applies at once."""
    registry = plugin_specs()
    return build_plugin_set(current_plugin_settings(registry), registry)


def scheduler_plugins() -> dict[str, Any]:
    """SPEC §14 `GET /api/v1/scheduler/plugins`: {filters, scorers: [{name, weight}], preempt_stage}."""
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
        })
    return listing


def plugin_description(spec: PluginSpec) -> str:
    description = (spec.description or spec.factory.__doc__
                   or getattr(import_module(spec.factory.__module__), "__doc__", None) or "")
    return " ".join(description.strip().split("\n\n")[0].split())


def plugin_history(*, limit: int = 20) -> QuerySet[PluginChange]:
    return PluginChange.objects.select_related("actor").order_by("-at", "-id")[:limit]


def notification_channels() -> list[NotificationChannel]:
    """The webhook and e-mail channels, always both, in that order (a missing row reads as disabled)."""
    rows = {channel.kind: channel for channel in NotificationChannel.objects.all()}
    return [rows.get(kind) or NotificationChannel(kind=kind, events=list(TASK_EVENTS))
            for kind in NotificationChannel.Kind.values]
