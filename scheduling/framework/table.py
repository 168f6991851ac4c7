"""A column view of the snapshot's nodes that filters and scorers evaluate many nodes at once over.

Built once per snapshot (`table_for`), kept current by `refresh_row` after each in-memory bind. Each row's
`row_version` grows on refresh, so a plugin caching per-row derived values (the nvlink group scores) can tell which
rows went stale without being told.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from scheduling.framework.arrays import clipped
from scheduling.framework.cards import cards_are_uniform
from scheduling.framework.single_tenant import card_holder
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, SchedulerConfig

AVAILABLE_STATUSES = frozenset({"online", "busy"})
# What changed a row (`NodeTable.refresh_rows`).
PLACED, READ, CHANGED_IN_MEMORY = "placed", "read", "changed in memory"
NO_CODE = -1
UNKNOWN_CODE = -2  # a task value no node has


# Node columns, in the order `NodeTable._node_values` returns them.
_NODE_COLUMNS = (
    ("available", bool),            # status online or busy
    ("schedulable", bool),          # not cordoned
    ("dedicated", np.int64),        # dedicated tenant id, -1 for none
    ("gpu_total", np.int64),
    ("gpu_used", np.int64),         # the scheduler's ledger
    ("inference_tasks", np.int64),
    ("host_cpu_free", float),       # registered CPU cores − those active tasks book (design §16.1)
    ("host_memory_free_mb", np.int64),
    ("cpu_usage", float),           # CPU % / 100
    ("memory_usage", float),        # used MB / (GB × 1024); NaN when the node has not reported its size
    ("has_gpu_info", bool),         # a GPU type or a card list has been reported
    ("type_bits", np.uint64),       # bit i: GPU type number i (gpu_types) on the node
    ("type_overflow", bool),        # a 65th GPU type: checked per node
    ("region", np.int64),           # vocabulary codes, NO_CODE when the field is empty
    ("zone", np.int64),
    ("rack", np.int64),
    ("rdma_score", float),
    ("rdma_false", bool),           # labelled rdma: false
    ("cards_by_position", bool),    # card i sits in column i (lets plugins use bitmasks)
    ("uniform_cards", bool),        # every card of one type and model (else a task picks one group, cards.py)
    ("card_holder", np.int64),      # the one tenant a node whose containers see every card holds (single_tenant.py)
)
# Card columns (node × card position), in the order `NodeTable._card_columns` returns them.
_CARD_COLUMNS = (
    ("card_exists", bool),
    ("card_free", bool),            # no active occupant
    ("card_no_whole", bool),        # no whole-card occupant (shards may stack)
    ("card_ok", bool),              # memory utilisation under the threshold
    ("card_occupied", bool),        # some tenant holds part of it
    ("card_free_mb", float),        # SchedulerConfig.card_free_mb
    ("card_capacity_mb", float),    # total − reserve: what an empty card offers
    ("card_total_mb", float),
    ("card_compute_left", float),   # percent of its compute no shard holds (design §8)
)


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
        self.names = [node.name for node in nodes]
        self.name_array = np.array(self.names, dtype=object)
        self.width = width = max((len(node.cards) for node in nodes), default=0) or 1
        self.regions, self.zones, self.racks, self.gpu_types = _Vocabulary(), _Vocabulary(), _Vocabulary(), {}
        self.plugin_cache: dict[str, Any] = {}

        node_rows = [self._node_values(node) for node in nodes]
        columns = list(zip(*node_rows)) if node_rows else [()] * len(_NODE_COLUMNS)
        for (name, dtype), values in zip(_NODE_COLUMNS, columns):
            setattr(self, name, np.array(values, dtype=dtype).reshape(count))
        self.row_version = np.zeros(count, np.int64)
        # What the scheduler cache must read again before the next cycle (`scheduling.cache.snapshot_cache`,
        # `stale_ids`): nodes changed in memory by anything but a placement its bind then committed as placed
        # (`bound`) or a read of the database, and nodes with placements not committed (yet).
        self._changed_otherwise: set[int] = set()
        self._unconfirmed: Counter[int] = Counter()
        # The bind transactions whose placements were all confirmed here: their entries in the node change log
        # are already in the table.
        self.own_transactions: set[int] = set()
        # Every row refreshed, in order (repeats included), for the table's whole life: what equivalence caches
        # re-read (`framework.equivalence`); `reshaped_rows` only those whose node changed more than its usage
        # (`static_signature`). A scheduler cache's table lives at most `snapshot_cache.FULL_REBUILD_SECONDS`.
        self.changed_rows: list[int] = []
        self.reshaped_rows: list[int] = []
        # The equivalence caches over this table, one per plugin context (`framework.equivalence`): they outlive
        # a cycle as the table does.
        self.equivalence: list[tuple[Any, Any]] = []
        self._signatures = [static_signature(node) for node in nodes]

        # The card columns are computed over arrays of the raw card figures (some 20,000 cards on a large
        # cluster), as `refresh_rows` does for the nodes that changed.
        positions, raw = _raw_card_figures(nodes, width)
        flat = np.zeros((count * width, len(_CARD_COLUMNS)))
        if raw:
            flat[positions] = self._card_columns(np.array(raw, dtype=float))
        for index, (name, dtype) in enumerate(_CARD_COLUMNS):
            setattr(self, name, flat[:, index].reshape(count, width).astype(dtype))
        self._derive(slice(None), build=True)
        # Every node's cards of one type and model: a task's card class then matters to no usage rule.
        self.all_uniform = bool(self.uniform_cards.all())

    def _derive(self, rows: slice | np.ndarray, *, build: bool = False) -> None:
        """Task-independent combinations of the columns that filters and scorers use, so an attempt is a few NumPy
        operations over `rows` of them instead of a dozen over the card matrix: cards free for a whole-card task,
        cards a shard may join, per node their count, whether every card is over the memory threshold, the largest
        card capacity, and the usage terms of node usage."""
        exists, ok = self.card_exists[rows], self.card_ok[rows]
        usable = exists & self.card_free[rows] & ok
        shardable = exists & self.card_no_whole[rows] & ok
        memory = self.memory_usage[rows]
        has_memory = ~np.isnan(memory)
        has_cards = self.gpu_total[rows] > 0
        # The node-usage terms of design §6 that do not depend on the task (`spread.mean_usage` adds the GPU one).
        known_usage = self.cpu_usage[rows] + np.where(has_memory, memory, 0.0)
        usage_terms = 1 + has_memory.astype(np.int64) + has_cards
        card_divisor = np.where(has_cards, self.gpu_total[rows], 1)
        if build:
            self.known_usage, self.usage_terms, self.has_cards, self.card_divisor = (
                known_usage, usage_terms, has_cards, card_divisor)
            self.card_usable, self.card_shardable = usable, shardable
            self.card_open = shardable & ~self.card_occupied
            self.usable_cards = usable.sum(axis=1)
            self.cards_all_overloaded = exists.any(axis=1) & ~(exists & ok).any(axis=1)
            self.max_card_capacity_mb = np.where(exists, self.card_capacity_mb, -np.inf).max(axis=1)
            return
        self.known_usage[rows], self.usage_terms[rows], self.has_cards[rows], self.card_divisor[rows] = (
            known_usage, usage_terms, has_cards, card_divisor)
        self.card_usable[rows], self.card_shardable[rows] = usable, shardable
        self.card_open[rows] = shardable & ~self.card_occupied[rows]
        self.usable_cards[rows] = usable.sum(axis=1)
        self.cards_all_overloaded[rows] = exists.any(axis=1) & ~(exists & ok).any(axis=1)
        self.max_card_capacity_mb[rows] = np.where(exists, self.card_capacity_mb[rows], -np.inf).max(axis=1)

    def refresh_row(self, row: int, *, cause: str = CHANGED_IN_MEMORY) -> None:
        self.refresh_rows([row], cause=cause)

    def refresh_rows(self, rows: list[int], *, cause: str = CHANGED_IN_MEMORY) -> None:
        """Re-read the rows' nodes (after they changed in place; distinct rows): every column at once for all.
        `cause`: what changed them — a placement applied in memory (PLACED), the database read again (READ), or
        anything else (CHANGED_IN_MEMORY)."""
        if not rows:
            return
        if len(rows) == 1:
            self._refresh_one(rows[0])
        else:
            self._refresh_many(rows)
        for row in rows:
            node = self.nodes[row]
            if cause == PLACED:
                self._unconfirmed[node.id] += 1
            elif cause == READ:
                self._unconfirmed.pop(node.id, None)
                self._changed_otherwise.discard(node.id)
            else:
                self._changed_otherwise.add(node.id)
            self.changed_rows.append(row)
            if cause == PLACED:
                continue    # a placement changes usage only (`static_signature`)
            signature = static_signature(node)
            if signature != self._signatures[row]:
                self._signatures[row] = signature
                self.reshaped_rows.append(row)
                self.all_uniform = bool(self.uniform_cards.all())

    def bound(self, node_id: int, *, transaction: int, as_placed: bool) -> None:
        """Bind `transaction` committed a placement on the node: `as_placed`, exactly as it was applied in memory
        (PLACED), so the row holds what the database now says of the node; otherwise the node is read again (a
        READ after this clears that). Every placement a bind transaction committed is told here, so its entries in
        the node change log need not be read (`own_transactions`)."""
        if as_placed and self._unconfirmed[node_id] > 0:
            self._unconfirmed[node_id] -= 1
        else:
            self._changed_otherwise.add(node_id)
        self.own_transactions.add(transaction)

    def stale_ids(self) -> set[int]:
        """The nodes the database may hold otherwise than the table: changed in memory by anything but a placement
        committed as placed since they were last read."""
        return self._changed_otherwise | {node_id for node_id, count in self._unconfirmed.items() if count > 0}

    def forget_changes(self) -> None:
        """The scheduler cache read the nodes it needed: start counting changes afresh."""
        self._changed_otherwise.clear()
        self._unconfirmed.clear()
        self.own_transactions.clear()

    def _refresh_one(self, row: int) -> None:
        """`_refresh_many` for one row (each in-memory bind), in plain Python: for one node's few cards that is
        several times faster than array operations. Same formulas as `_card_columns` and `_derive`."""
        node = self.nodes[row]
        for (name, _), value in zip(_NODE_COLUMNS, self._node_values(node)):
            getattr(self, name)[row] = value
        config, width = self.config, self.width
        cards = node.cards[:width]
        values = [(True, card.is_free, card.whole_card_tasks == 0, not config.card_overloaded(card),
                   card.active_tasks > 0, config.card_free_mb(card),
                   card.memory_total_mb - config.reserve_mb(card.memory_total_mb), card.memory_total_mb,
                   100 - card.shard_compute_percent) for card in cards]
        padding = width - len(cards)
        for (name, _), column in zip(_CARD_COLUMNS, zip(*values) if values else [()] * len(_CARD_COLUMNS)):
            getattr(self, name)[row] = (*column, *(0,) * padding)
        usable = [exists and free and ok for exists, free, _, ok, *_ in values]
        shardable = [no_whole and ok for _, _, no_whole, ok, *_ in values]
        self.card_usable[row] = (*usable, *(False,) * padding)
        self.card_shardable[row] = (*shardable, *(False,) * padding)
        self.card_open[row] = (*(can and not occupied for can, (_, _, _, _, occupied, *_) in zip(shardable, values)),
                               *(False,) * padding)
        self.usable_cards[row] = sum(usable)
        self.cards_all_overloaded[row] = bool(values) and not any(ok for _, _, _, ok, *_ in values)
        self.max_card_capacity_mb[row] = max((capacity for _, _, _, _, _, _, capacity, *_ in values), default=-np.inf)
        memory = float(self.memory_usage[row])
        has_memory = not np.isnan(memory)
        has_cards = bool(self.gpu_total[row] > 0)
        self.known_usage[row] = float(self.cpu_usage[row]) + (memory if has_memory else 0.0)
        self.usage_terms[row] = 1 + has_memory + has_cards
        self.has_cards[row] = has_cards
        self.card_divisor[row] = self.gpu_total[row] if has_cards else 1
        self.row_version[row] += 1

    def _refresh_many(self, rows: list[int]) -> None:
        index = np.array(rows, np.int64)
        nodes = [self.nodes[row] for row in rows]
        for (name, _), values in zip(_NODE_COLUMNS, zip(*(self._node_values(node) for node in nodes))):
            getattr(self, name)[index] = values
        width = self.width
        positions, raw = _raw_card_figures(nodes, width)
        flat = np.zeros((len(rows) * width, len(_CARD_COLUMNS)))
        if raw:
            flat[positions] = self._card_columns(np.array(raw, dtype=float))
        for column, (name, dtype) in enumerate(_CARD_COLUMNS):
            getattr(self, name)[index] = flat[:, column].reshape(len(rows), width).astype(dtype)
        self._derive(index)
        self.row_version[index] += 1

    def _node_values(self, node: NodeInfo) -> tuple:
        """One row of _NODE_COLUMNS, in that order."""
        types = node.gpu_types
        bits, overflow = 0, False
        for gpu_type in types:
            bit = self.gpu_types.setdefault(gpu_type, len(self.gpu_types))
            if bit < 64:
                bits |= 1 << bit
            else:
                overflow = True
        rdma_score, rdma_false = _rdma(node.labels)
        return (
            node.status in AVAILABLE_STATUSES, node.schedulable,
            -1 if node.dedicated_tenant_id is None else node.dedicated_tenant_id,
            node.gpu_total, node.gpu_used, node.inference_tasks, node.host_cpu_free, node.host_memory_free_mb,
            node.cpu_percent / 100,
            node.memory_used_mb / (node.memory_gb * 1024) if node.memory_gb else np.nan,
            bool(types) or bool(node.cards), bits, overflow,
            self.regions.code(node.region), self.zones.code(node.zone), self.racks.code(node.rack),
            rdma_score, rdma_false,
            all(card.index == column for column, card in enumerate(node.cards)),
            cards_are_uniform(node),
            card_holder(node),
        )

    def _card_columns(self, raw: np.ndarray) -> np.ndarray:
        """The card columns of many cards at once: raw columns total MB, used MB, whole-card tasks, shard tasks,
        shard MB, shard compute percent → one row of _CARD_COLUMNS per card."""
        config = self.config
        total, used, whole, shards, shard_mb, shard_compute = raw.T
        with np.errstate(divide="ignore", invalid="ignore"):
            utilization = np.where(total != 0, 100.0 * used / np.where(total != 0, total, 1), 0.0)
        reserve = np.maximum(config.gpu_reserve_fixed_mb, total * config.gpu_reserve_percent / 100)
        active = whole + shards
        return np.column_stack((
            np.ones(len(raw)), active == 0, whole == 0, ~(utilization >= config.gpu_memory_percent), active > 0,
            total - reserve - np.maximum(used, shard_mb), total - reserve, total, 100 - shard_compute,
        ))

    def shard_room(self, task, rows: np.ndarray) -> np.ndarray:
        """Per row and card position: whether the card keeps the memory (after reserve) and the compute fractional
        `task` would take there, as bind counts them (`sharing.compute_percent_for`, design §8)."""
        memory, compute = self.shard_fit(task, rows)
        return memory & compute

    def shard_fit(self, task, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`shard_room`'s two halves: per row and card position, whether the card keeps the memory, and whether it
        keeps the compute."""
        if task.gpu_compute_percent:
            needed = task.gpu_compute_percent
        else:
            total = self.card_total_mb[rows]
            has_memory = total > 0
            # The percent of a card's memory, rounded up, within 1 … 100 (the divisor is never 0: no np.errstate).
            share = np.ceil(100 * task.gpu_memory_mb / np.where(has_memory, total, 1))
            needed = np.where(has_memory, clipped(share, 1, 100), 100)
        return self.card_free_mb[rows] >= task.gpu_memory_mb, self.card_compute_left[rows] >= needed

    def free_card_bits(self, rows: np.ndarray) -> np.ndarray:
        """Per row, bit i set when card i is free and under the memory threshold (rows with cards by position and
        at most 63 cards; other rows get -1)."""
        mask = self.card_free[rows] & self.card_ok[rows]
        if self.width > 63:
            return np.full(len(rows), -1, np.int64)
        bits = mask.astype(np.int64) @ (np.int64(1) << np.arange(self.width, dtype=np.int64))
        return np.where(self.cards_by_position[rows], bits, -1)


def static_signature(node: NodeInfo) -> tuple:
    """What a node is, apart from its usage (GPUs in use, card occupancy and memory, load, inference count): the
    fields the rules that ignore usage read (`RowPlugin.follows_usage`). An in-memory placement never changes it."""
    taints = tuple(tuple(sorted(taint.items())) for taint in node.taints)
    return (node.status, node.schedulable, node.dedicated_tenant_id, node.region, node.zone, node.rack,
            node.gpu_type, tuple(sorted(node.labels.items())), taints,
            tuple((card.index, card.type, card.model) for card in node.cards))


def _rdma(labels: dict[str, str]) -> tuple[float, bool]:
    """design §6 rdma score: no label 50; `true` 70 + speed/10 capped at +30; `false` 40."""
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
    if table is None or table.config != config or table.nodes is not snapshot.nodes \
            or table.size != len(snapshot.nodes):
        table = snapshot.table = NodeTable(snapshot.nodes, config)
    return table


def single_row_table(node: NodeInfo, config: SchedulerConfig) -> NodeTable:
    """A one-node table, so the per-node plugin entry points share the row code."""
    return NodeTable([node], config)


def _raw_card_figures(nodes, width: int) -> tuple[list[int], list[tuple]]:
    """Each card's flat position in a `len(nodes) × width` grid and its raw figures, in `_CARD_COLUMNS` order."""
    positions, raw = [], []
    for row, node in enumerate(nodes):
        for column, card in enumerate(node.cards[:width]):
            positions.append(row * width + column)
            raw.append((card.memory_total_mb, card.memory_used_mb, card.whole_card_tasks, card.shard_tasks,
                        card.shard_memory_mb, card.shard_compute_percent))
    return positions, raw
