"""Runs one scheduling attempt for one task over an in-memory snapshot (SPEC §4–§5.3).

Public API (stable; the cycle and bind code in `scheduling.cycle`/`scheduling.services` call it):

    framework = Framework(plugin_set, SchedulerConfig.from_settings())
    result = framework.schedule(task, snapshot, rng)          # -> ScheduleResult
    if result.node is not None:
        cards = framework.select_cards(task, result.node)     # in-node card choice, SPEC §5.3
        ... CAS claim, re-check, persist ...
        apply_bind(snapshot, task, result.node, cards)        # the next task of the cycle sees the usage
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from scheduling.framework.registry import PluginSet
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo
from scheduling.framework.status import Status


@dataclass
class ScheduleResult:
    """The outcome of one attempt. `node` is None when nothing fits; then `code` is a SPEC §12 code."""

    task: TaskInfo
    node: NodeInfo | None
    code: str | None
    message: str
    total_nodes: int

    @property
    def filtered(self) -> dict[int, Status]:
        """node id → the Status of the first filter that rejected it."""
        raise NotImplementedError

    @property
    def scores(self) -> dict[int, dict[str, float]]:
        """node id → {plugin name: raw score} for every feasible node."""
        raise NotImplementedError

    @property
    def totals(self) -> dict[int, float]:
        """node id → Σ weight × score for every feasible node."""
        raise NotImplementedError

    def diagnostic_nodes(self, limit: int = 50) -> list[dict[str, Any]]:
        """`[{node: name, reason: str|None, scores: {plugin: score}, total: float|None}]`: every filtered node
        (reason set, scores empty, total None) then the best `limit` feasible nodes by total (reason None)."""
        raise NotImplementedError


class Framework:
    def __init__(self, plugin_set: PluginSet, config: SchedulerConfig) -> None:
        self.plugin_set = plugin_set
        self.config = config

    def describe(self) -> dict[str, Any]:
        """SPEC §14 `GET /scheduler/plugins` body: {filters, scorers: [{name, weight}], preempt_stage}."""
        return self.plugin_set.describe()

    def schedule(self, task: TaskInfo, snapshot: ClusterSnapshot, rng: random.Random) -> ScheduleResult:
        """PreScore → built-in chain → Filter plugins → Score → PostScore; pick the best total, ties at random."""
        raise NotImplementedError

    def select_cards(self, task: TaskInfo, node: NodeInfo) -> list[int]:
        """Card indexes for `task` on `node` (SPEC §5.3); [] when the node cannot hold it (or it needs no card)."""
        return select_cards(task, node, self.config)


def select_cards(task: TaskInfo, node: NodeInfo, config: SchedulerConfig) -> list[int]:
    raise NotImplementedError


def apply_bind(snapshot: ClusterSnapshot, task: TaskInfo, node: NodeInfo, cards: list[int]) -> None:
    """Record a successful bind in the snapshot: ledger gpu_used, card occupancy (whole card or shard), inference
    count, and invalidate the node's cached derived data. Mutate snapshot nodes only through this function."""
    raise NotImplementedError
