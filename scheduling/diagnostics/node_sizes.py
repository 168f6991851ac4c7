"""Every registered node's size as `never_fits` reads it (its cards as one stand-in per card type with the largest
card's memory, its CPU cores and memory, its dedication), kept by the process between submissions.

Reading every node and aggregating every card on each submit made the submit's warning cost as much as the rest of
the request together at 300 nodes, and it grows with the cluster. The process keeps the sizes and, on each submit,
asks the node change log what changed since its last look (`nodes.selectors.nodes_changed_since`, one indexed
statement) and re-reads only those nodes: a heartbeat changes a node's row but seldom its size. The whole cluster is
read again every FULL_READ_SECONDS (the log is pruned after `CHANGE_LOG_RETENTION`, far longer) and when the
database is another one. Nodes of one size are one stand-in: `never_fits` reads sizes, never names.

Inside a transaction the sizes are read afresh and not kept: what a transaction reads may yet be rolled back, and a
kept size would outlive it.
"""

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.postgres.aggregates import ArrayAgg
from django.db import connection
from django.db.models import Max

from nodes.models import GPU, Node
from nodes.selectors import change_watermark, nodes_changed_since
from scheduling.cache.snapshot_cache import FULL_REBUILD_SECONDS
from scheduling.framework.snapshot import CardInfo, NodeInfo

# The scheduler cache's full rebuild interval, which keeps every look well within the change log's retention.
FULL_READ_SECONDS = FULL_REBUILD_SECONDS


@dataclass(frozen=True)
class NodeSize:
    dedicated_tenant_id: int | None
    gpu_type: str
    gpu_total: int
    cpu_cores: int
    memory_gb: int
    card_types: tuple[str, ...]
    largest_card_mb: int

    def stand_in(self) -> NodeInfo:
        return NodeInfo(id=0, name="", dedicated_tenant_id=self.dedicated_tenant_id, gpu_type=self.gpu_type,
                        gpu_total=self.gpu_total, cpu_cores=self.cpu_cores, memory_gb=self.memory_gb,
                        cards=[CardInfo(index=0, type=card_type, memory_total_mb=self.largest_card_mb)
                               for card_type in self.card_types])


def read_sizes(node_ids: Iterable[int] | None = None) -> dict[int, NodeSize]:
    """Node id → size, of every node or of `node_ids` (those deleted are absent), in two statements."""
    cards = GPU.objects.all()
    nodes = Node.objects.all()
    if node_ids is not None:
        node_ids = list(node_ids)
        cards, nodes = cards.filter(node_id__in=node_ids), nodes.filter(id__in=node_ids)
    by_node = {node_id: (tuple(sorted(types)), largest) for node_id, types, largest in
               cards.values("node_id").annotate(types=ArrayAgg("type", distinct=True), largest=Max("memory_total_mb"))
               .values_list("node_id", "types", "largest")}
    sizes = {}
    for node_id, dedicated_tenant_id, gpu_type, gpu_total, cpu_cores, memory_gb in nodes.values_list(
            "id", "dedicated_tenant_id", "gpu_type", "gpu_total", "cpu_cores", "memory_gb"):
        card_types, largest = by_node.get(node_id, ((), 0))
        sizes[node_id] = NodeSize(dedicated_tenant_id, gpu_type, gpu_total, cpu_cores, memory_gb, card_types,
                                  largest)
    return sizes


def _stand_ins(sizes: dict[int, NodeSize]) -> list[NodeInfo]:
    """One stand-in per distinct size, in the order of the nodes' ids."""
    return [size.stand_in() for size in dict.fromkeys(sizes[node_id] for node_id in sorted(sizes))]


class NodeSizes:
    def __init__(self, *, clock=time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._sizes: dict[int, NodeSize] = {}
        self._stand_ins: list[NodeInfo] = []
        self._watermark: str | None = None
        self._read_at = 0.0
        self._database: str | None = None
        self.full_reads = 0

    def stand_ins(self) -> list[NodeInfo]:
        """A stand-in NodeInfo per distinct node size of the cluster as the database holds it now."""
        if connection.in_atomic_block:
            return _stand_ins(read_sizes())
        with self._lock:
            database = connection.settings_dict["NAME"]
            if (self._watermark is None or database != self._database
                    or self._clock() - self._read_at >= FULL_READ_SECONDS):
                self._read_all(database)
            else:
                self._read_changes()
            return self._stand_ins

    def forget(self) -> None:
        with self._lock:
            self._watermark = None

    def _read_all(self, database: str) -> None:
        # Taken before the read: a change committed while the nodes are read is read again next time, never missed.
        watermark = change_watermark()
        self._sizes = read_sizes()
        self._stand_ins = _stand_ins(self._sizes)
        self._watermark, self._database, self._read_at = watermark, database, self._clock()
        self.full_reads += 1

    def _read_changes(self) -> None:
        changes = nodes_changed_since(since=self._watermark)
        if changes.node_ids:
            fresh = read_sizes(changes.node_ids)
            before = [self._sizes.get(node_id) for node_id in changes.node_ids]
            for node_id in changes.node_ids:
                if node_id in fresh:
                    self._sizes[node_id] = fresh[node_id]
                else:
                    self._sizes.pop(node_id, None)
            if before != [self._sizes.get(node_id) for node_id in changes.node_ids]:
                self._stand_ins = _stand_ins(self._sizes)
        self._watermark = changes.watermark


node_sizes = NodeSizes()
