"""Preview of a plugin-set change: the head of the pending queue placed under the current and the proposed set."""

from collections.abc import Callable
from typing import Any

from scheduling.cycle import CYCLE_LIMIT
from scheduling.framework.framework import Framework
from scheduling.framework.registry import PluginSetting
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.plugins import build_plugin_set
from scheduling.quotas import load_tenant_quotas
from scheduling.selectors import current_plugin_settings, plugin_specs, queue_head
from scheduling.snapshot_builder import build_snapshot
from scheduling.what_if.low_priority import at_low_priority
from scheduling.what_if.read_only import read_only_transaction
from scheduling.what_if.simulation import compare, copy_snapshot, simulate

SettingsChange = Callable[[list[PluginSetting]], list[PluginSetting]]


def plugin_set_preview(*, change: SettingsChange, limit: int = CYCLE_LIMIT) -> dict[str, Any]:
    """The first `limit` pending tasks (a cycle's worth) placed on the cluster as it is now, under the current
    plugin settings and under `change(current settings)`, and how the two differ (`simulation.compare`).

    `change` may refuse the proposal by raising; nothing is read past it then. The database is only read, in one
    read-only transaction, and the placing happens after it has ended, at the lowest CPU priority."""
    with read_only_transaction():
        registry = plugin_specs()
        current = current_plugin_settings(registry)
        proposed = change(current)
        config = SchedulerConfig.from_settings()
        snapshot = build_snapshot()
        snapshot.quotas = load_tenant_quotas()
        tasks = queue_head(limit=limit)

    def both_sides() -> dict[str, Any]:
        sides = [simulate(Framework(build_plugin_set(settings, registry), config), copy_snapshot(snapshot), tasks)
                 for settings in (current, proposed)]
        return {"considered": len(tasks), **compare(*sides)}

    return at_low_priority(both_sides)
