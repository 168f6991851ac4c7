"""A column view of the snapshot's nodes that filters and scorers evaluate many nodes at once over.

Built once per snapshot (`table_for`), kept current by `refresh_row` after each in-memory bind. Each row's
`row_version` grows on refresh, so a plugin caching per-row derived values (the nvlink group scores) can tell which
rows went stale without being told.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, SchedulerConfig

AVAILABLE_STATUSES = frozenset({"online", "busy"})
NO_CODE = -1
UNKNOWN_CODE = -2  # a task value no node has


class _Vocabulary(dict[str, int]):
    def code(self, value: str) -> int:
        if not value:
            return NO_CODE
        return self.setdefault(value, len(self))

    def lookup(self, value: str) -> int:
        return self.get(value, UNKNOWN_CODE) if value else NO_CODE


class NodeTable:
    def __init__(self, nodes: list[NodeInfo], config: SchedulerConfig) -> None:
        self.nodes = nodes
        self.config = config
        self.size = count = len(nodes)
        self.row_of = {node.id: row for row, node in enumerate(nodes)}
        self.width = width = max((len(node.cards) for node in nodes), default=0) or 1
        self.regions, self.zones, self.racks, self.gpu_types = _Vocabulary(), _Vocabulary(), _Vocabulary(), {}
        self.plugin_cache: dict[str, Any] = {}

        self.available = np.zeros(count, bool)
        self.schedulable = np.zeros(count, bool)
        self.dedicated = np.full(count, -1, np.int64)
        self.gpu_total = np.zeros(count, np.int64)
        self.gpu_used = np.zeros(count, np.int64)
        self.inference_tasks = np.zeros(count, np.int64)
        self.cpu_usage = np.zeros(count)
        self.memory_usage = np.zeros(count)  # NaN for a node that has not reported its memory size
        self.has_gpu_info = np.zeros(count, bool)
        self.type_bits = np.zeros(count, np.uint64)
        self.type_overflow = np.zeros(count, bool)  # a 65th GPU type: checked per node
        self.region = np.full(count, NO_CODE, np.int64)
        self.zone = np.full(count, NO_CODE, np.int64)
        self.rack = np.full(count, NO_CODE, np.int64)
        self.rdma_score = np.full(count, 50.0)
        self.rdma_false = np.zeros(count, bool)
        self.row_version = np.zeros(count, np.int64)

        shape = (count, width)
        self.card_exists = np.zeros(shape, bool)
        self.card_free = np.zeros(shape, bool)            # no active occupant
        self.card_no_whole = np.zeros(shape, bool)        # no whole-card occupant (shards may stack)
        self.card_ok = np.zeros(shape, bool)              # memory utilisation under the threshold
        self.card_occupied = np.zeros(shape, bool)        # some tenant holds part of it
        self.card_free_mb = np.zeros(shape)               # SchedulerConfig.card_free_mb
        self.card_capacity_mb = np.zeros(shape)           # total − reserve: what an empty card offers

        for row, node in enumerate(nodes):
            self._fill(row, node)

    def refresh_row(self, row: int) -> None:
        self._fill(row, self.nodes[row])
        self.row_version[row] += 1

    def _fill(self, row: int, node: NodeInfo) -> None:
        config = self.config
        self.available[row] = node.status in AVAILABLE_STATUSES
        self.schedulable[row] = node.schedulable
        self.dedicated[row] = -1 if node.dedicated_tenant_id is None else node.dedicated_tenant_id
        self.gpu_total[row] = node.gpu_total
        self.gpu_used[row] = node.gpu_used
        self.inference_tasks[row] = node.inference_tasks
        self.cpu_usage[row] = node.cpu_percent / 100
        self.memory_usage[row] = node.memory_used_mb / (node.memory_gb * 1024) if node.memory_gb else np.nan
        types = {card.type.lower() for card in node.cards if card.type}
        if node.gpu_type:
            types.add(node.gpu_type.lower())
        self.has_gpu_info[row] = bool(types) or bool(node.cards)
        bits = 0
        for gpu_type in types:
            bit = self.gpu_types.setdefault(gpu_type, len(self.gpu_types))
            if bit < 64:
                bits |= 1 << bit
            else:
                self.type_overflow[row] = True
        self.type_bits[row] = bits
        self.region[row] = self.regions.code(node.region)
        self.zone[row] = self.zones.code(node.zone)
        self.rack[row] = self.racks.code(node.rack)
        self.rdma_score[row], self.rdma_false[row] = _rdma(node.labels)

        for column, card in enumerate(node.cards[: self.width]):
            self.card_exists[row, column] = True
            self.card_free[row, column] = card.is_free
            self.card_no_whole[row, column] = card.whole_card_tasks == 0
            self.card_ok[row, column] = not config.card_overloaded(card)
            self.card_occupied[row, column] = card.active_tasks > 0
            self.card_free_mb[row, column] = config.card_free_mb(card)
            self.card_capacity_mb[row, column] = card.memory_total_mb - config.reserve_mb(card.memory_total_mb)


def _rdma(labels: dict[str, str]) -> tuple[float, bool]:
    """SPEC §6 rdma score: no label 50; `true` 70 + speed/10 capped at +30; `false` 40."""
    value = str(labels.get("rdma", "")).strip().lower()
    if value == "true":
        try:
            speed = float(labels.get("rdma-speed", 0) or 0)
        except ValueError:
            speed = 0.0
        return 70 + min(max(speed, 0) / 10, 30), False
    if value == "false":
        return 40.0, True
    return 50.0, False


def table_for(snapshot: ClusterSnapshot, config: SchedulerConfig) -> NodeTable:
    """The snapshot's table, built on first use (and again if the node list or the config changed)."""
    table = snapshot.table
    if table is None or table.config is not config or table.nodes is not snapshot.nodes \
            or table.size != len(snapshot.nodes):
        table = snapshot.table = NodeTable(snapshot.nodes, config)
    return table


def single_row_table(node: NodeInfo, config: SchedulerConfig) -> NodeTable:
    """A one-node table, so the per-node plugin entry points share the row code."""
    return NodeTable([node], config)
