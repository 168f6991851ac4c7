"""The scheduler cache (kube-scheduler's cache and snapshot): a long-lived scheduler process keeps its nodes and
their NumPy table between cycles and re-reads only the nodes that changed.

Each cycle asks the node change log (`nodes.selectors.nodes_changed_since`, written by triggers in the same
transaction as every change to a node, its cards, its placements or its labels) which nodes changed since the last
look, and re-reads those — with the nodes the previous cycle changed in memory otherwise than by placements its
binds committed exactly as placed (`NodeTable.stale_ids`) — in three queries, updating their NodeInfo and their table
row in place. The log's entries of those binds' own transactions are left out: the table already holds them, and
re-reading every node the last cycle bound to was most of a cycle's setup. The whole cluster is read afresh
on the first cycle, every FULL_REBUILD_SECONDS (a safety net, which also prunes the log), whenever the set of
node ids is not the one the cache holds (the database was switched, emptied or rolled back under it) and after a
cycle that failed half way. Binds still re-check every placement against the live rows they lock, so a stale
cache can cost a refused bind and a retry, never a wrong placement.

One cycle at a time uses the cached nodes (cycles mutate them); a cycle that starts while another one in the
same process holds them gets a snapshot of its own. A cache that only reads (`prunes_log=False`: the preemption
plans' in a web process, inside a read-only transaction) leaves pruning the log to the schedulers' caches.
"""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.db import connection

from nodes.models import Node
from nodes.selectors import change_watermark, nodes_changed_since
from nodes.services import node_changes_prune
from scheduling.cache.snapshot_builder import build_snapshot, build_tenancy, read_nodes, update_in_place
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, SchedulerConfig
from scheduling.framework.table import READ, NodeTable

FULL_REBUILD_SECONDS = 60.0
# Far longer than FULL_REBUILD_SECONDS: a cache asks what changed only within that time of its last look, so the
# rows it needs are never pruned yet.
CHANGE_LOG_RETENTION = timedelta(minutes=10)

_NODE_ID_FINGERPRINT = f"SELECT count(*), coalesce(sum(id), 0) FROM {Node._meta.db_table}"


class SnapshotCache:
    def __init__(self, *, clock=time.monotonic, prunes_log: bool = True) -> None:
        self._clock = clock
        self._prunes_log = prunes_log
        self._lock = threading.Lock()
        self._nodes: list[NodeInfo] | None = None
        self._row_of: dict[int, int] = {}
        self._table: NodeTable | None = None
        self._watermark: str | None = None
        self._built_at = 0.0
        self._fingerprint: tuple[int, int] | None = None
        self._database: str | None = None
        self.full_builds = 0
        self.nodes_reread = 0

    @contextmanager
    def snapshot(self, config: SchedulerConfig) -> Iterator[ClusterSnapshot]:
        """The cluster as the database holds it now, for one cycle; its nodes and table are the cache's own and
        are kept for the next cycle unless the block raises."""
        if not self._lock.acquire(blocking=False):
            yield build_snapshot()
            return
        try:
            try:
                snapshot = self._current(config)
                yield snapshot
            except BaseException:
                self.invalidate()
                raise
        finally:
            self._lock.release()

    def invalidate(self) -> None:
        """Read everything afresh at the next cycle."""
        self._nodes = None

    def _current(self, config: SchedulerConfig) -> ClusterSnapshot:
        database = connection.settings_dict["NAME"]
        if self._nodes is None or self._database != database \
                or self._clock() - self._built_at >= FULL_REBUILD_SECONDS:
            self._build(config, database)
        else:
            changes = nodes_changed_since(since=self._watermark, own_transactions=self._table.own_transactions)
            self._watermark = changes.watermark
            self._apply(changes.node_ids | self._table.stale_ids(), config)
            if self._node_ids_changed():
                self._build(config, database)
        snapshot = ClusterSnapshot(nodes=self._nodes, tenancy=build_tenancy(self._nodes))
        snapshot.table = self._table
        return snapshot

    def _build(self, config: SchedulerConfig, database: str) -> None:
        # The look comes first: whatever commits while the nodes are read is found again by the next look.
        if self._prunes_log:
            node_changes_prune(older_than=CHANGE_LOG_RETENTION)
        self._watermark = change_watermark()
        self._nodes = read_nodes()
        self._index_and_tabulate(config)
        self._fingerprint = _fingerprint_of(self._nodes)
        self._database, self._built_at = database, self._clock()
        self.full_builds += 1

    def _apply(self, node_ids: set[int], config: SchedulerConfig) -> None:
        """Re-read `node_ids`: each one updated in place, added, or dropped when it no longer exists."""
        fresh = {node.id: node for node in read_nodes(node_ids=sorted(node_ids))} if node_ids else {}
        self.nodes_reread += len(node_ids)
        added = [node for node_id, node in fresh.items() if node_id not in self._row_of]
        dropped = {node_id for node_id in node_ids if node_id in self._row_of and node_id not in fresh}
        for node_id, node in fresh.items():
            row = self._row_of.get(node_id)
            if row is not None:
                update_in_place(self._nodes[row], node)
        if added or dropped:
            kept = [node for node in self._nodes if node.id not in dropped]
            self._nodes = sorted(kept + added, key=lambda node: node.id)
            self._fingerprint = _fingerprint_of(self._nodes)
        if added or dropped or self._table.config != config \
                or any(len(node.cards) > self._table.width for node in fresh.values()):
            self._index_and_tabulate(config)
            return
        self._table.refresh_rows([self._row_of[node_id] for node_id in fresh], cause=READ)
        self._table.forget_changes()

    def _index_and_tabulate(self, config: SchedulerConfig) -> None:
        self._row_of = {node.id: row for row, node in enumerate(self._nodes)}
        self._table = NodeTable(self._nodes, config)

    def _node_ids_changed(self) -> bool:
        """Whether the database's node ids are no longer the cache's (compared by count and sum)."""
        with connection.cursor() as cursor:
            cursor.execute(_NODE_ID_FINGERPRINT)
            count, total = cursor.fetchone()
        return (count, int(total)) != self._fingerprint


def _fingerprint_of(nodes: list[NodeInfo]) -> tuple[int, int]:
    return len(nodes), sum(node.id for node in nodes)


# The scheduler process's cache (each Celery worker process, `run_scheduler`, each benchmark instance).
snapshot_cache = SnapshotCache()
