"""The trace replay protocol of SPEC §15.9 (the FGD paper's simulator protocol) on the production framework.

Tasks are drawn uniformly with replacement from the pod list (seeded) and submitted one at a time until the arrived
GPU demand would pass `arrival` × the cluster's GPUs. Each task is placed at once by `Framework.schedule` and the
framework's Reserve point (card choice) over an in-memory snapshot, exactly as a scheduling cycle places it, and never leaves; a task
that does not fit fails for good. Allocation ratio = GPU capacity allocated (shards by their share) / all GPUs.

CPU and memory requests count against their node: the replay books them into the node's CPU % and used memory
(what spread and binpack read as node usage) and adds `NodeCapacity`, its stand-in for bind's CPU and memory
re-check, which in production is made against measured load instead of requests.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduling.framework.framework import Framework, apply_bind
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import PluginSet, PluginSetting
from scheduling.framework.snapshot import ClusterSnapshot, SchedulerConfig, TaskInfo
from scheduling.framework.table import NodeTable, table_for
from scheduling.plugins import build_plugin_set, default_registry, fgd
from scheduling.plugins.fgd import fragmentation as frag
from scheduling.plugins.fgd.workload import TargetWorkload
from scheduling.replay.trace import MILLI, TraceNode, TracePod, to_node, to_task

# The paper's cluster has no memory reserve and no load thresholds: a card is full when its share is, a node when
# its requests are.
REPLAY_CONFIG = SchedulerConfig(gpu_reserve_fixed_mb=0, gpu_reserve_percent=0, cpu_percent=100, memory_percent=100)
CAPACITY_TOLERANCE = 1e-6
CURVE_STEP = 0.01   # one curve point per 1 % of the cluster's GPUs arrived

# A layout policy is a set of production plugin settings; "random" leaves only scorers that score every replayed
# node alike, so ties (every node) are broken at random.
LAYOUT_PLUGINS = ("spread", "binpack", fgd.NAME)
POLICIES: dict[str, tuple[PluginSetting, ...]] = {
    "random": tuple(PluginSetting(name, False, 0) for name in LAYOUT_PLUGINS),
    "spread": (PluginSetting("spread", True, 1), PluginSetting("binpack", False, 0), PluginSetting(fgd.NAME, False, 0)),
    "binpack": (PluginSetting("spread", False, 0), PluginSetting("binpack", True, 1),
                PluginSetting(fgd.NAME, False, 0)),
    "fgd": (PluginSetting("spread", False, 0), PluginSetting("binpack", False, 0), PluginSetting(fgd.NAME, True, 1)),
    # fgd whose score ties (whole points) go to the best fit: the paper's simulator breaks ties by node name, which
    # packs too; the production framework breaks them at random.
    "fgd-bestfit": (PluginSetting("spread", False, 0), PluginSetting("binpack", False, 0),
                    PluginSetting(fgd.NAME, True, 1, {"tie_break": fgd.BEST_FIT})),
    # fgd with HeteroFlow's CPU-aware fragment and a best-fit tie-break (scheduling.plugins.fgd).
    "fgd-cpu": (PluginSetting("spread", False, 0), PluginSetting("binpack", False, 0),
                PluginSetting(fgd.NAME, True, 1, fgd.IMPROVED)),
}


class NodeCapacity(RowPlugin):
    """The replay's CPU and memory check: the task's requests fit in what the node's earlier tasks left."""

    name = "replay-capacity"
    reasons = ("insufficient CPU", "insufficient memory")

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        cores, memory_mb = self._capacity(table)
        codes = np.zeros(len(rows), np.int8)
        codes[memory_mb[rows] * (1 - table.memory_usage[rows]) < task.memory_mb - CAPACITY_TOLERANCE] = 2
        codes[cores[rows] * (1 - table.cpu_usage[rows]) < task.cpu_cores - CAPACITY_TOLERANCE] = 1
        return codes

    @staticmethod
    def _capacity(table: NodeTable) -> tuple[np.ndarray, np.ndarray]:
        cached = table.plugin_cache.get(NodeCapacity.name)
        if cached is None:
            cached = table.plugin_cache[NodeCapacity.name] = (
                np.array([float(node.cpu_cores) for node in table.nodes]),
                np.array([node.memory_gb * 1024.0 for node in table.nodes]))
        return cached


@dataclass
class SeedResult:
    seed: int
    allocation_at_full: float | None      # % of GPUs allocated when the arrived demand reached 100 %
    allocation_at_arrival: float          # % at the end (arrival × GPUs arrived)
    arrived_tasks: int
    failed_tasks: int
    failed_gpu_demand: float              # GPUs the failed tasks asked for
    fragmentation: float                  # Σ F_n against the target workload at the end, in GPUs
    idle_gpus: float
    curve: list[tuple[float, float]] = field(default_factory=list)   # (arrived %, allocated %)

    @property
    def fragmentation_percent(self) -> float:
        return 100.0 * self.fragmentation / self.idle_gpus if self.idle_gpus else 0.0


def plugin_set_for(policy: str, workload: TargetWorkload) -> PluginSet:
    try:
        settings = POLICIES[policy]
    except KeyError:
        raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}") from None
    plugin_set = build_plugin_set(settings, default_registry(extra_plugins=()))
    for plugin, _ in plugin_set.scorers:
        if isinstance(plugin, fgd.Fgd):
            plugin.use_workload(workload)
    plugin_set.filters.append(NodeCapacity())
    return plugin_set


def trace_workload(pods: Sequence[TracePod]) -> TargetWorkload:
    return TargetWorkload.from_tasks(to_task(pod, index) for index, pod in enumerate(pods))


class Replay:
    """One replay of `pods` on `nodes` under one policy and seed; `run()` returns the SeedResult."""

    def __init__(self, nodes: Sequence[TraceNode], pods: Sequence[TracePod], *, policy: str, seed: int,
                 arrival: float = 1.3, workload: TargetWorkload | None = None) -> None:
        self.pods = pods
        self.seed = seed
        self.arrival = arrival
        self.workload = workload if workload is not None else trace_workload(pods)
        self.snapshot = ClusterSnapshot(nodes=[to_node(node, index + 1) for index, node in enumerate(nodes)])
        self.framework = Framework(plugin_set_for(policy, self.workload), REPLAY_CONFIG)
        self.capacity_milli = sum(node.gpus for node in nodes) * MILLI
        self.placements: list[tuple[TaskInfo, int, list[int]]] = []   # (task, node id, cards), in bind order

    def tasks(self):
        """The arriving tasks, in order: uniform draws with replacement until the demand would pass the target."""
        draws = np.random.default_rng(self.seed)
        target = self.arrival * self.capacity_milli
        arrived, task_id = 0, 0
        while True:
            for index in draws.integers(len(self.pods), size=1024).tolist():
                pod = self.pods[index]
                if arrived + pod.gpu_demand_milli > target:
                    return
                arrived += pod.gpu_demand_milli
                task_id += 1
                yield to_task(pod, task_id), pod.gpu_demand_milli

    def run(self, arriving: Iterable[tuple[TaskInfo, int]] | None = None) -> SeedResult:
        """Replay the arriving tasks (or the given (task, GPU demand in milli) pairs, in order)."""
        rng = random.Random(self.seed)
        snapshot, framework = self.snapshot, self.framework
        table = table_for(snapshot, framework.config)
        used_cpu, used_memory = np.zeros(table.size), np.zeros(table.size)
        arrived = allocated = failed = failed_milli = tasks = 0
        at_full = None
        curve, next_point = [], 0.0
        for task, demand in self.tasks() if arriving is None else arriving:
            tasks += 1
            arrived += demand
            node = framework.schedule(task, snapshot, rng).node
            cards = framework.reserve(task, node, snapshot.tenancy) if node is not None else []
            permitted = node is not None and framework.permit([(task, node, cards)],
                                                              tenancy=snapshot.tenancy).is_success
            if not permitted or (task.gpu_required or task.is_fractional) and not cards:
                failed += 1
                failed_milli += demand
            else:
                row = table.row_of[node.id]
                used_cpu[row] += task.cpu_cores
                used_memory[row] += task.memory_mb
                node.cpu_percent = 100.0 * used_cpu[row] / node.cpu_cores if node.cpu_cores else 100.0
                node.memory_used_mb = int(used_memory[row])
                apply_bind(snapshot, task, node, cards)
                self.placements.append((task, node.id, cards))
                allocated += demand
            if at_full is None and arrived >= self.capacity_milli:
                at_full = 100.0 * allocated / self.capacity_milli
            if arrived >= next_point * self.capacity_milli:
                curve.append((round(100.0 * arrived / self.capacity_milli, 2),
                              round(100.0 * allocated / self.capacity_milli, 3)))
                next_point = np.floor(arrived / self.capacity_milli / CURVE_STEP + 1) * CURVE_STEP
        curve.append((round(100.0 * arrived / self.capacity_milli, 2), round(100.0 * allocated / self.capacity_milli, 3)))
        fragmented, idle = frag.cluster_fragmentation(table, self.workload)
        return SeedResult(self.seed, at_full, 100.0 * allocated / self.capacity_milli, tasks, failed,
                          failed_milli / MILLI, fragmented, idle, curve)
