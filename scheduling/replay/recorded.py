"""The workload this cluster was given, as arrivals for the replay (`manage.py replay_trace --from-db`). Reads only.

The cluster: every node of the node table an admin has not cordoned (`schedulable`), with its cards (types, models,
memory, NUMA), labels, dedication and the share groups, as if online and idle: no tasks, no load, no ledger. Tenant
quotas are left out (they hold a task back the same under every policy; the replay cannot hold, only fail).

The tasks: every task created in the window, whatever its tenant or state, in creation order, with the shape it was
submitted with (GPU type, whole cards or shard memory and compute share, CPU, memory, labels such as `gpu-model`,
priority). A task arrives at its creation time and is placed at once; it leaves after its duration:
`finished_at − started_at` when it ran and finished; never, when it started and is still running (it outlasts the
window); `default_duration` when it never started (still pending, or settled before it ran). Members of a training
gang arrive one by one as single tasks.

Arrived GPU demand: whole cards, or a shard's memory over the mean memory of the cluster's cards of its type (of all
cards when it names no type, or no card has it).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo
from scheduling.models import Task
from scheduling.replay.simulate import Arrival
from scheduling.replay.trace import MILLI
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_tenancy, read_nodes, task_info_from_row


@dataclass(frozen=True)
class RecordedWorkload:
    snapshot: ClusterSnapshot
    arrivals: list[Arrival]
    since: datetime
    until: datetime
    finished: int           # tasks whose duration is their started → finished time
    still_running: int      # started and not finished: placed for the rest of the replay
    never_started: int      # given the default duration

    @property
    def tasks(self) -> list[TaskInfo]:
        return [arrival.task for arrival in self.arrivals]


def recorded_config() -> SchedulerConfig:
    """The production figures (card memory reserve, inference cap), with the load thresholds at 100 %: the replay
    books CPU and memory requests and checks them itself, where bind checks measured load against 90 %."""
    return replace(SchedulerConfig.from_settings(), cpu_percent=100, memory_percent=100)


def replay_cluster() -> ClusterSnapshot:
    nodes = [_idle(node) for node in read_nodes(occupied=False) if node.schedulable]
    return ClusterSnapshot(nodes=nodes, tenancy=build_tenancy(nodes))


def recorded_workload(*, since: datetime, until: datetime, default_duration: timedelta) -> RecordedWorkload:
    snapshot = replay_cluster()
    rows = (Task.objects.filter(created_at__gte=since, created_at__lte=until).order_by("created_at", "id")
            .values_list("started_at", "finished_at", *TASK_INFO_FIELDS))
    shard_demand = _ShardDemand(snapshot.nodes)
    arrivals, finished, running, never_started = [], 0, 0, 0
    for started_at, finished_at, *fields in rows:
        task = task_info_from_row(tuple(fields))
        at = (task.created_at - since).total_seconds()
        if started_at is not None and finished_at is not None:
            leaves_at = at + max((finished_at - started_at).total_seconds(), 0.0)
            finished += 1
        elif started_at is not None:
            leaves_at = math.inf
            running += 1
        else:
            leaves_at = at + default_duration.total_seconds()
            never_started += 1
        arrivals.append(Arrival(task, shard_demand.of(task), at=at, leaves_at=leaves_at))
    return RecordedWorkload(snapshot, arrivals, since, until, finished, running, never_started)


def _idle(node: NodeInfo) -> NodeInfo:
    node.status, node.gpu_used, node.cpu_percent, node.memory_used_mb = "online", 0, 0.0, 0
    for card in node.cards:
        card.memory_used_mb, card.utilization, card.temperature = 0, 0.0, 0.0
    return node


class _ShardDemand:
    def __init__(self, nodes: list[NodeInfo]) -> None:
        memory_by_type: dict[str, list[int]] = {}
        for card in (card for node in nodes for card in node.cards):
            memory_by_type.setdefault(card.type, []).append(card.memory_total_mb)
        every_card = [memory for memories in memory_by_type.values() for memory in memories]
        self._all = statistics.fmean(every_card) if every_card else 0.0
        self._by_type = {gpu_type: statistics.fmean(memories) for gpu_type, memories in memory_by_type.items()}

    def of(self, task: TaskInfo) -> int:
        if task.gpu_required:
            return task.gpu_required * MILLI
        if not task.is_fractional:
            return 0
        card_mb = self._by_type.get(task.gpu_type) or self._all
        return min(MILLI, round(task.gpu_memory_mb * MILLI / card_mb)) if card_mb else MILLI
