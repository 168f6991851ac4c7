"""Preview of a plugin-set change: the head of the pending queue placed under the current and the proposed set."""

from collections.abc import Callable
from typing import Any

from django.db.models import Max, Min

from scheduling import lifecycle
from scheduling.cache.snapshot_builder import build_snapshot, prepare_admission
from scheduling.cycle.run import CYCLE_LIMIT
from scheduling.framework.framework import Framework
from scheduling.framework.registry import PluginSetting
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.groups.gang_bind import GangKey, read_gangs
from scheduling.models import Task, TaskGroup, TaskType
from scheduling.plugins import build_plugin_set
from scheduling.selectors import current_plugin_settings, plugin_specs, queue_head
from scheduling.what_if.low_priority import at_low_priority
from scheduling.what_if.read_only import read_only_transaction
from scheduling.what_if.simulation import GangToPlace, QueueItem, compare, copy_snapshot, not_previewed, simulate

SettingsChange = Callable[[list[PluginSetting]], list[PluginSetting]]


def plugin_set_preview(*, change: SettingsChange, limit: int = CYCLE_LIMIT) -> dict[str, Any]:
    """The first `limit` entries of the pending queue (a cycle's worth: single tasks and training gangs, placed
    whole) placed on the cluster as it is now, under the current plugin settings and under `change(current
    settings)`, and how the two differ (`simulation.compare`).

    `change` may refuse the proposal by raising; nothing is read past it then. The database is only read, in one
    read-only transaction, and the placing happens after it has ended, at the lowest CPU priority."""
    with read_only_transaction():
        registry = plugin_specs()
        current = current_plugin_settings(registry)
        proposed = change(current)
        config = SchedulerConfig.from_settings()
        snapshot = prepare_admission(build_snapshot())
        queue = queue_items(limit=limit)

    def both_sides() -> dict[str, Any]:
        frameworks = [Framework(build_plugin_set(settings, registry), config) for settings in (current, proposed)]
        sides = [simulate(framework, copy_snapshot(snapshot), queue) for framework in frameworks]
        gangs = [item for item in queue if isinstance(item, GangToPlace)]
        return {"considered": len(queue) - len(gangs) + sum(len(gang.pending) for gang in gangs),
                "gangs": len(gangs), "not_previewed": not_previewed(frameworks[1]), **compare(*sides)}

    return at_low_priority(both_sides)


def queue_items(*, limit: int) -> list[QueueItem]:
    """The first `limit` entries of the pending queue in queue order (priority descending, then creation time): single
    tasks, training gangs ranked by their highest member priority and their own creation time, and multi-node
    replicas of services (design §17.1) by their members', as the cycle walks it. Parked work is included: a change
    of the plugin set is what may make it fit."""
    tasks = queue_head(limit=limit)
    gang_rows = (TaskGroup.objects.filter(type=TaskType.TRAINING, world_size__gt=1,
                                          members__status=lifecycle.PENDING)
                 .exclude(status=TaskGroup.Status.STOPPED).annotate(top=Max("members__priority"))
                 .order_by("-top", "created_at", "id").values_list("id", "top", "created_at")[:limit])
    gang_order = {GangKey(group_id): (-top, created_at, 1, group_id, -1) for group_id, top, created_at in gang_rows}
    replica_rows = (Task.objects.filter(status=lifecycle.PENDING, replica__isnull=False)
                    .exclude(group__status=TaskGroup.Status.STOPPED).values("group_id", "replica")
                    .annotate(top=Max("priority"), created_at=Min("created_at"))
                    .order_by("-top", "created_at", "group_id", "replica")
                    .values_list("group_id", "replica", "top", "created_at")[:limit])
    gang_order.update({GangKey(group_id, replica): (-top, created_at, 1, group_id, replica)
                       for group_id, replica, top, created_at in replica_rows})
    gangs = {GangKey(group.id, group.replica): GangToPlace(group, live)
             for group, live in read_gangs(list(gang_order))}
    entries = [((-task.priority, task.created_at, 0, task.id, 0), task) for task in tasks]
    entries += [(gang_order[key], gang) for key, gang in gangs.items()]
    return [item for _, item in sorted(entries, key=lambda entry: entry[0])[:limit]]
