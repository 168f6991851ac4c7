"""Placing the head of the queue on a copy of the cluster, as a cycle would but binding nothing. Pure: no ORM.

Each task goes through the framework's extension points in the cycle's order (PreFilter → Filter → Score → Reserve
→ Permit) and a placement is applied to the copy at once, so the next task sees it. A training gang is placed whole
at its place in the queue, as the cycle places it (`groups.gang.place_gang`): every member or none. What only the
live cluster can answer is left out (`NOT_PREVIEWED`): PostFilter (an eviction is previewed by `preemption_plan`),
the Bind plugins and the bind's live re-check of node load.
"""

import copy
import random
from dataclasses import dataclass, replace
from typing import Any

from scheduling import lifecycle
from scheduling.diagnostics.cluster_view import fragmentation
from scheduling.framework import reasons
from scheduling.framework.framework import Framework
from scheduling.framework.snapshot import ClusterSnapshot, TaskInfo
from scheduling.framework.table import AVAILABLE_STATUSES
from scheduling.groups.gang import GangFailure, GroupInfo, incomplete_gang, place_gang

# Ties between equal nodes are broken by this seed on both sides, so an unchanged plugin set places every task
# exactly as before.
TIE_SEED = 0


@dataclass(frozen=True)
class GangToPlace:
    """A gang (a training group, or one multi-node replica of a service) at its place in the queue; `live`: its
    unfinished members with their status, by rank."""

    group: GroupInfo
    live: list[tuple[TaskInfo, str]]

    @property
    def pending(self) -> list[TaskInfo]:
        return [task for task, status in self.live if status == lifecycle.PENDING]


QueueItem = TaskInfo | GangToPlace


@dataclass(frozen=True)
class Placement:
    task_id: int
    node: str | None
    cards: tuple[int, ...]
    code: str

    @property
    def placed(self) -> bool:
        return self.node is not None


@dataclass(frozen=True)
class Side:
    """One plugin set's outcome: every task's placement in queue order and the cluster after them."""

    plugins: dict[str, Any]
    placements: list[Placement]
    snapshot: ClusterSnapshot

    def by_task(self) -> dict[int, Placement]:
        return {placement.task_id: placement for placement in self.placements}


def copy_snapshot(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """A copy the simulation may change freely; derived data (the framework's table, node caches) is rebuilt."""
    nodes = copy.deepcopy(snapshot.nodes)
    for node in nodes:
        node.cache.clear()
    return replace(snapshot, nodes=nodes, quotas=copy.deepcopy(snapshot.quotas), table=None, _by_id=None)


def simulate(framework: Framework, snapshot: ClusterSnapshot, queue: list[QueueItem]) -> Side:
    """Place the tasks and gangs of `queue` in order on `snapshot` (changed in place: pass a copy)."""
    rng = random.Random(TIE_SEED)
    placements = []
    for item in queue:
        if isinstance(item, GangToPlace):
            placements += _place_gang(framework, snapshot, item, rng)
        else:
            placements.append(_place_task(framework, snapshot, item, rng))
    return Side(plugins=framework.describe(), placements=placements, snapshot=snapshot)


def not_previewed(framework: Framework) -> list[str]:
    """What the preview leaves to the live cluster, by name: the enabled Bind plugins and the live re-checks."""
    binders = [plugin.name for plugin in framework.plugin_set.binders]
    return [*(f"Bind plugin {name}" for name in binders), "preemption (PostFilter)", "the bind's live re-check"]


def _place_task(framework: Framework, snapshot: ClusterSnapshot, task: TaskInfo, rng: random.Random) -> Placement:
    placing = framework.place(task, snapshot, rng)
    if placing.node is None:
        return Placement(task.id, None, (), placing.result.code)
    if placing.refusal is not None:
        return Placement(task.id, None, (), placing.refusal.attempt_code or reasons.NO_SCHEDULABLE_NODES)
    return Placement(task.id, placing.node.name, tuple(placing.cards), reasons.SCHEDULED)


def _place_gang(framework: Framework, snapshot: ClusterSnapshot, gang: GangToPlace,
                rng: random.Random) -> list[Placement]:
    outcome = incomplete_gang(gang.group, gang.live) or place_gang(gang.group, gang.pending, snapshot, framework, rng)
    if isinstance(outcome, GangFailure):
        return [Placement(task.id, None, (), outcome.code) for task in gang.pending]
    outcome.apply_to(snapshot)
    return [Placement(member.task.id, member.node_name, member.cards, reasons.SCHEDULED)
            for member in outcome.placements]


def compare(current: Side, proposed: Side) -> dict[str, Any]:
    """The two sides and what differs: tasks placed on another node, placed only under the proposal, placed only
    under the current set; each side's allocation over the nodes either side placed a task on, and fragmentation."""
    before, after = current.by_task(), proposed.by_task()
    touched = {placement.node for side in (current, proposed) for placement in side.placements if placement.placed}
    return {
        "current": _side(current, touched),
        "proposed": _side(proposed, touched),
        "moved": [{"task": task_id, "from_node": was.node, "to_node": after[task_id].node}
                  for task_id, was in before.items()
                  if was.placed and after[task_id].placed and was.node != after[task_id].node],
        "newly_placed": [task_id for task_id, was in before.items() if not was.placed and after[task_id].placed],
        "newly_unplaced": [task_id for task_id, was in before.items() if was.placed and not after[task_id].placed],
        "fragmentation": {"current": fragmentation(current.snapshot), "proposed": fragmentation(proposed.snapshot)},
    }


def _side(side: Side, touched: set[str]) -> dict[str, Any]:
    return {
        "plugins": side.plugins,
        "placements": [{"task": placement.task_id, "node": placement.node, "cards": list(placement.cards),
                        "code": placement.code} for placement in side.placements],
        "placed": sum(placement.placed for placement in side.placements),
        "allocation": allocation(side.snapshot, nodes=touched),
    }


def allocation(snapshot: ClusterSnapshot, *, nodes: set[str]) -> dict[str, Any]:
    """Cards in use of the cluster's available nodes, in total and on each of `nodes` (by name, in node order)."""
    available = [node for node in snapshot.nodes if node.status in AVAILABLE_STATUSES and node.schedulable]
    total = sum(node.gpu_total for node in available)
    used = sum(min(node.gpu_used, node.gpu_total) for node in available)
    return {
        "gpu_total": total,
        "gpu_used": used,
        "percent": round(100 * used / total, 1) if total else 0.0,
        "nodes": [{"node": node.name, "gpu_total": node.gpu_total, "gpu_used": node.gpu_used}
                  for node in snapshot.nodes if node.name in nodes],
    }
