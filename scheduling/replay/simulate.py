"""The trace replay protocol of design §15.9 (the FGD paper's simulator protocol) on the production framework.

`Replay` places a sequence of arrivals on an in-memory snapshot: each task at once by `Framework.schedule` and the
framework's Reserve point (card choice), exactly as a scheduling cycle places it; a task that does not fit fails for
good. An arrival may carry the time it leaves again: before each arrival, every placed task whose time has come is
released (`apply_release`). Allocation ratio = GPU capacity allocated (shards by their share of the card they got)
/ all GPUs.

`TraceReplay` is the openb protocol: tasks drawn uniformly with replacement from the pod list (seeded) and submitted
one at a time until the arrived GPU demand would pass `arrival` × the cluster's GPUs, never leaving.
`scheduling.replay.recorded` feeds `Replay` the tasks submitted to this cluster instead.

CPU and memory requests count against their node: the replay books them into the node's CPU % and used memory
(what spread and binpack read as node usage) and adds `NodeCapacity`, its stand-in for bind's CPU and memory
re-check, which in production is made against measured load instead of requests.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduling.framework.framework import Framework
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.occupancy import Occupant, apply_bind, apply_release, occupied_cards
from scheduling.framework.registry import PluginSet, PluginSetting
from scheduling.framework.result import ScheduleResult
from scheduling.framework.snapshot import CardInfo, ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo
from scheduling.framework.table import NodeTable, table_for
from scheduling.plugins import build_plugin_set, default_registry, fgd
from scheduling.plugins.fgd import TargetWorkload
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
    # fgd as an admin who enables it gets it (its registered default settings, design §15.9).
    "fgd": (PluginSetting("spread", False, 0), PluginSetting("binpack", False, 0),
            PluginSetting(fgd.NAME, True, 1, fgd.SPEC.default.extra)),
    # The paper's FGD (no CPU term; score ties broken at random, where the paper's simulator breaks them by node
    # name), for comparison.
    "fgd-paper": (PluginSetting("spread", False, 0), PluginSetting("binpack", False, 0),
                  PluginSetting(fgd.NAME, True, 1, fgd.PAPER)),
}


class NodeCapacity(RowPlugin):
    """The replay's CPU and memory check: the task's requests fit in what the node's earlier tasks left."""

    name = "replay-capacity"
    reasons = ("insufficient CPU", "insufficient memory")

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        cores, memory_mb = self.capacity(table)
        codes = np.zeros(len(rows), np.int8)
        codes[memory_mb[rows] * (1 - table.memory_usage[rows]) < task.memory_mb - CAPACITY_TOLERANCE] = 2
        codes[cores[rows] * (1 - table.cpu_usage[rows]) < task.cpu_cores - CAPACITY_TOLERANCE] = 1
        return codes

    @staticmethod
    def capacity(table: NodeTable) -> tuple[np.ndarray, np.ndarray]:
        """Per table row: the node's CPU cores and memory in MB."""
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


@dataclass(frozen=True)
class Arrival:
    task: TaskInfo
    demand_milli: int              # what it adds to the arrived GPU demand: whole cards, or its share of one card
    at: float = 0.0                # seconds from the start of the replay
    leaves_at: float = math.inf    # when it finishes, if it is placed


@dataclass(eq=False)
class Placed:
    """A task on its node and cards, and the GPU capacity it holds."""

    task: TaskInfo
    node: NodeInfo
    cards: list[int]
    allocated_milli: int


class Replay:
    """Arrivals placed in order on `snapshot` (changed in place) under one policy; `run()` returns the SeedResult.
    The seed breaks score ties, as a cycle's random generator does. `place` and `release` are the two moves a
    replay makes (`scheduling.replay.dynamic` drives them with a waiting queue)."""

    def __init__(self, snapshot: ClusterSnapshot, *, policy: str, seed: int, workload: TargetWorkload,
                 config: SchedulerConfig = REPLAY_CONFIG) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.workload = workload
        self.snapshot = snapshot
        self.framework = Framework(plugin_set_for(policy, workload), config)
        self.capacity_milli = sum(len(node.cards) for node in snapshot.nodes) * MILLI
        self.placements: list[tuple[TaskInfo, int, list[int]]] = []   # (task, node id, cards), in bind order
        self.table = table_for(snapshot, self.framework.config)
        self.allocated_milli = 0
        self._used_cpu, self._used_memory = np.zeros(self.table.size), np.zeros(self.table.size)
        self._on_node: dict[int, list[Placed]] = defaultdict(list)
        self.last_result: ScheduleResult | None = None    # of the last `place`: why it found no node

    def place(self, task: TaskInfo) -> Placed | None:
        """Place `task` as a cycle does (`Framework.place`) and bind it on the snapshot; None if it does not fit
        (a task that needs cards and got none is not placed: there is no bind to choose them again)."""
        placed: list[Placed] = []
        placing = self.framework.place(task, self.snapshot, self.rng, cards_required=True,
                                       apply=lambda _snapshot, *placement: placed.append(self.bind(*placement)))
        self.last_result = placing.result
        return placed[0] if placed else None

    def bind(self, task: TaskInfo, node: NodeInfo, cards: list[int]) -> Placed:
        """Put `task` on `node`'s `cards` (chosen by `place`, or by a defrag plan for a moved task)."""
        snapshot = self.snapshot
        self._book(node, task, +1)
        apply_bind(snapshot, task, node, cards)
        self.placements.append((task, node.id, cards))
        placed = Placed(task, node, cards, _allocated_milli(task, occupied_cards(node, Occupant.of_task(task, cards))))
        self.allocated_milli += placed.allocated_milli
        self._on_node[node.id].append(placed)
        return placed

    def release(self, placed: Placed) -> None:
        """The task leaves: its cards, CPU and memory are free again (`apply_release`, the inverse of the bind)."""
        staying = self._on_node[placed.node.id]
        staying.remove(placed)
        self._book(placed.node, placed.task, -1)
        apply_release(self.snapshot, placed.task, placed.node, placed.cards,
                      staying=[(other.task, other.cards) for other in staying])
        self.allocated_milli -= placed.allocated_milli

    def on_node(self, node_id: int) -> list[Placed]:
        """The placements on a node now."""
        return list(self._on_node[node_id])

    def capacity_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Per table row: CPU cores and memory in MB (the replay's capacity check reads the same)."""
        return NodeCapacity.capacity(self.table)

    def _book(self, node: NodeInfo, task: TaskInfo, sign: int) -> None:
        row = self.table.row_of[node.id]
        self._used_cpu[row] += sign * task.cpu_cores
        self._used_memory[row] += sign * task.memory_mb
        node.cpu_percent = 100.0 * self._used_cpu[row] / node.cpu_cores if node.cpu_cores else 100.0
        node.memory_used_mb = max(int(round(self._used_memory[row])), 0)

    def run(self, arrivals: Iterable[Arrival]) -> SeedResult:
        departures: list[tuple[float, int, Placed]] = []   # a heap: the next to leave first
        arrived = failed = failed_milli = tasks = 0
        at_full = None
        curve, next_point = [], 0.0
        for arrival in arrivals:
            while departures and departures[0][0] <= arrival.at:
                self.release(heapq.heappop(departures)[2])
            tasks += 1
            arrived += arrival.demand_milli
            placed = self.place(arrival.task)
            if placed is None:
                failed += 1
                failed_milli += arrival.demand_milli
            elif arrival.leaves_at < math.inf:
                heapq.heappush(departures, (arrival.leaves_at, tasks, placed))
            if at_full is None and arrived >= self.capacity_milli:
                at_full = 100.0 * self.allocated_milli / self.capacity_milli
            if arrived >= next_point * self.capacity_milli:
                curve.append((round(100.0 * arrived / self.capacity_milli, 2),
                              round(100.0 * self.allocated_milli / self.capacity_milli, 3)))
                next_point = np.floor(arrived / self.capacity_milli / CURVE_STEP + 1) * CURVE_STEP
        curve.append((round(100.0 * arrived / self.capacity_milli, 2),
                      round(100.0 * self.allocated_milli / self.capacity_milli, 3)))
        fragmented, idle = fgd.cluster_fragmentation(self.table, self.workload)
        return SeedResult(self.seed, at_full, 100.0 * self.allocated_milli / self.capacity_milli, tasks, failed,
                          failed_milli / MILLI, fragmented, idle, curve)


def _allocated_milli(task: TaskInfo, cards: list[CardInfo]) -> int:
    """GPU capacity a placed task holds: its whole cards, or its shard's share of the card it got."""
    if task.gpu_required:
        return task.gpu_required * MILLI
    if task.is_fractional and cards:
        card = cards[0]
        return min(MILLI, task.gpu_memory_mb * MILLI // card.memory_total_mb) if card.memory_total_mb else MILLI
    return 0


class TraceReplay(Replay):
    """One replay of `pods` on `nodes` under one policy and seed, by the openb protocol."""

    def __init__(self, nodes: Sequence[TraceNode], pods: Sequence[TracePod], *, policy: str, seed: int,
                 arrival: float = 1.3, workload: TargetWorkload | None = None) -> None:
        super().__init__(ClusterSnapshot(nodes=[to_node(node, index + 1) for index, node in enumerate(nodes)]),
                         policy=policy, seed=seed, workload=workload if workload is not None else trace_workload(pods))
        self.pods = pods
        self.arrival = arrival

    def arrived_pods(self):
        """The arriving pods, in order: uniform draws with replacement until the demand would pass the target."""
        draws = np.random.default_rng(self.seed)
        target = self.arrival * self.capacity_milli
        arrived = 0
        while True:
            for index in draws.integers(len(self.pods), size=1024).tolist():
                pod = self.pods[index]
                if arrived + pod.gpu_demand_milli > target:
                    return
                arrived += pod.gpu_demand_milli
                yield pod

    def tasks(self):
        """The arriving pods as tasks, numbered from 1."""
        for task_id, pod in enumerate(self.arrived_pods(), start=1):
            yield Arrival(to_task(pod, task_id), pod.gpu_demand_milli)

    def run(self, arrivals: Iterable[Arrival] | None = None) -> SeedResult:
        """Replay the drawn tasks (or the given arrivals, in order)."""
        return super().run(self.tasks() if arrivals is None else arrivals)
