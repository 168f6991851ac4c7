"""The live read of bind: lock the involved rows and read what the database holds now, in one round trip.

Locks are taken in one order everywhere a bind happens — node rows in id order, then the cohorts of the involved
tenants in id order (two tenants of one cohort borrow from one pool: their binds take turns, so the same unused
quota is never lent twice), then the rows of the involved tenants that have quotas in id order, then (by the claim
statement) task rows in id order — so two batches that share nodes, cohorts, tenants or tasks cannot deadlock. READ COMMITTED takes a fresh snapshot per statement, so the
reads that follow the locks see every bind that committed before ours.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

from nodes.models import GPU, Node
from scheduling.cache.node_info import assemble_node
from scheduling.fair_share.book import QuotaBook
from scheduling.fair_share.quotas import LIMITED, fill_book, tenant_gpu_usage_rows
from scheduling.framework.occupancy import Occupant, assume
from scheduling.framework.snapshot import CardInfo, NodeInfo, SchedulerConfig
from scheduling.framework.table import NodeTable
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task
from tenants.models import Cohort, Tenant, TenantGpuQuota

_ACTIVE = sorted(ACTIVE_STATES)

_LOCK_NODES = f"""
SELECT n.id, n.name, n.gpu_type, n.status, n.schedulable, n.dedicated_tenant_id, n.cpu_percent, n.memory_used_mb,
       n.memory_gb, n.gpu_total, n.gpu_used, n.labels, n.internal_ip, n.public_ip, n.cpu_cores
FROM {Node._meta.db_table} n WHERE n.id = ANY(%(node_ids)s)
ORDER BY n.id
FOR UPDATE OF n
"""

_LOCK_COHORTS = f"""
SELECT c.id FROM {Cohort._meta.db_table} c
 WHERE c.id IN (SELECT t.cohort_id FROM {Tenant._meta.db_table} t WHERE t.id = ANY(%(tenant_ids)s))
 ORDER BY c.id
 FOR UPDATE OF c
"""

_BOOK_SCOPE = f"""
t.id = ANY(%(tenant_ids)s)
 OR t.cohort_id IN (SELECT i.cohort_id FROM {Tenant._meta.db_table} i WHERE i.id = ANY(%(tenant_ids)s))"""

# The involved tenants and every tenant of their cohorts: whose caps, quota rows and usage the admission weighs.
_BOOK_TENANTS = f"""
SELECT t.id, t.gpu_quota, t.cohort_id FROM {Tenant._meta.db_table} t WHERE {_BOOK_SCOPE}
"""

_BOOK_ROWS = f"""
SELECT q.tenant_id, q.gpu_type, q.nominal, q.borrowing_limit, q.lending_limit
  FROM {TenantGpuQuota._meta.db_table} q JOIN {Tenant._meta.db_table} t ON t.id = q.tenant_id WHERE {_BOOK_SCOPE}
"""


def _lock_limited_tenants(tenant_ids: list[int]) -> tuple[str, tuple]:
    """The statement locking those of the tenants the quota book limits (`quotas.LIMITED`, the snapshot's rule
    too), in id order."""
    return (Tenant.objects.filter(LIMITED, id__in=tenant_ids).order_by("id").select_for_update(of=("self",))
            .values_list("id").query.sql_with_params())


def _book_tenants(tenant_ids: list[int]) -> QuerySet:
    """`_BOOK_SCOPE` as a queryset, for the usage reader: of those, the tenants the book limits (whose usage
    admission weighs)."""
    cohorts = Tenant.objects.filter(id__in=tenant_ids, cohort__isnull=False).values("cohort_id")
    return Tenant.objects.filter(Q(id__in=tenant_ids) | Q(cohort_id__in=cohorts)).filter(LIMITED).values("id")


# One lookup per locked node (LATERAL), so each side walks its node index whatever the planner's statistics say:
# as `node_id = ANY(...)` over the whole table the plan flipped with them (without statistics a scan of every card
# and of every active task, 45 ms a batch at 5,000 nodes, against 1 ms for the lookups).
_LIVE_NODES = f"""
SELECT 'cards', n.id, c.rows
  FROM unnest(%(node_ids)s::bigint[]) AS n(id)
 CROSS JOIN LATERAL (
       SELECT json_agg(json_build_array(g.index, g.memory_total_mb, g.memory_used_mb, g.utilization, g.temperature,
                                        g.type, g.model, g.quarantined_at IS NOT NULL)) AS rows
         FROM {GPU._meta.db_table} g WHERE g.node_id = n.id) c
 WHERE c.rows IS NOT NULL
UNION ALL
SELECT 'placements', n.id, p.rows
  FROM unnest(%(node_ids)s::bigint[]) AS n(id)
 CROSS JOIN LATERAL (
       SELECT json_agg(json_build_array(t.tenant_id, t.type, t.gpus, t.shard, t.port, t.gpu_memory_mb, t.card_type,
                                        t.cpu_cores, t.memory_mb)) AS rows
         FROM {Task._meta.db_table} t WHERE t.node_id = n.id AND t.status = ANY(%(active)s)) p
 WHERE p.rows IS NOT NULL
"""

@dataclass
class LivePlacement:
    """One active task on a live node, as bind weighs it."""

    tenant_id: int
    type: str
    gpus: list[int]
    shard: dict[str, Any] | None
    port: int | None
    gpu_memory_mb: int = 0
    card_type: str = ""
    cpu_cores: float = 0.0
    memory_mb: int = 0

    def occupant(self, gpu_required: int = 0) -> Occupant:
        return Occupant.of_row(tenant_id=self.tenant_id, task_type=self.type, gpus=self.gpus, shard=self.shard,
                               gpu_memory_mb=self.gpu_memory_mb, card_type=self.card_type, gpu_required=gpu_required,
                               cpu_cores=self.cpu_cores, memory_mb=self.memory_mb)


@dataclass
class LiveNode:
    """A node row just locked, its cards as last reported and the active tasks on it (`placements`). A batch
    adds the placements it accepts (`hold`), so its later placements are checked as if those had committed."""

    id: int
    name: str
    gpu_type: str
    status: str
    schedulable: bool
    dedicated_tenant_id: int | None
    cpu_percent: float
    memory_used_mb: int
    memory_gb: int
    gpu_total: int
    gpu_used: int
    labels: dict[str, str]
    internal_ip: str
    public_ip: str | None
    cpu_cores: int
    card_rows: list[list] = field(default_factory=list)
    placements: list[LivePlacement] = field(default_factory=list)
    _node: NodeInfo | None = field(default=None, init=False, repr=False)

    def hold(self, placement: LivePlacement, gpu_required: int) -> None:
        self.placements.append(placement)
        self.gpu_used += gpu_required
        if self._node is not None:
            assume(self._node, placement.occupant(gpu_required))

    def card_row(self, index: int, card_type: str) -> list | None:
        """The card `(card_type, index)`; any card of that index when the type is not known."""
        rows = [row for row in self.card_rows if row[0] == index]
        wanted = card_type or self.gpu_type
        return next((row for row in rows if (row[5] or self.gpu_type) == wanted), None) or (
            None if card_type else next(iter(rows), None))

    def node_info(self) -> NodeInfo:
        """The node as the framework sees nodes: cards with their reported figures and live occupants (built once;
        `hold` keeps it current)."""
        if self._node is not None:
            return self._node
        node = NodeInfo(id=self.id, name=self.name, status=self.status, schedulable=self.schedulable,
                        dedicated_tenant_id=self.dedicated_tenant_id, labels=self.labels, gpu_type=self.gpu_type,
                        gpu_total=self.gpu_total, gpu_used=self.gpu_used, cpu_cores=self.cpu_cores,
                        memory_gb=self.memory_gb,
                        cpu_percent=self.cpu_percent, memory_used_mb=self.memory_used_mb)
        cards = (CardInfo(index=index, memory_total_mb=total, memory_used_mb=used, utilization=utilization,
                          temperature=temperature, type=vendor or "", model=model or "", quarantined=quarantined)
                 for index, total, used, utilization, temperature, vendor, model, quarantined in self.card_rows)
        self._node = assemble_node(node, cards, (held.occupant() for held in self.placements))
        return self._node


@dataclass
class LiveCluster:
    """What one bind transaction read under its locks."""

    nodes: dict[int, LiveNode]
    # The involved tenants' and their cohorts' quotas and usage now.
    quotas: QuotaBook
    _table: NodeTable | None = field(default=None, init=False, repr=False)
    # Nodes that took a placement since their row of the table was read.
    _held_since_read: set[int] = field(default_factory=set, init=False, repr=False)

    def table(self, config: SchedulerConfig, node_id: int) -> NodeTable:
        """The live nodes as the framework's table, for the re-check of `node_id` (built at the first; that node's
        row read again when it took a placement since: most nodes take one placement of a batch, and the re-check
        reads only the row of the node it checks)."""
        if self._table is None:
            self._table = NodeTable([node.node_info() for node in self.nodes.values()], config)
            self._held_since_read.clear()
        elif node_id in self._held_since_read:
            self._held_since_read.discard(node_id)
            self._table.refresh_rows([self._table.row_of[node_id]])
        return self._table

    def held(self, node: LiveNode) -> None:
        """The node took a placement of the batch (`LiveNode.hold`): its row is stale until `table` reads it."""
        self._held_since_read.add(node.id)


def lock_and_read(node_ids: list[int], tenant_ids: list[int]) -> LiveCluster:
    """BEGIN's first round trip: asynchronous commit, the locks and the live reads, pipelined.

    Asynchronous commit: a bind's COMMIT does not wait for the WAL flush (the disk's fsync would otherwise be most
    of a bind's time). A database crash can forget the last fraction of a second of binds; their tasks are then
    pending again, consistently (claim, ledger and timeline are one statement), and are scheduled anew.
    """
    raw = connection.connection
    with raw.pipeline():
        setting = raw.cursor()
        setting.execute("SET LOCAL synchronous_commit TO off")
        locked = raw.cursor()
        locked.execute(_LOCK_NODES, {"node_ids": node_ids})
        reads = {}
        if tenant_ids:
            for name, statement in (("cohorts", (_LOCK_COHORTS, {"tenant_ids": tenant_ids})),
                                    ("locked tenants", _lock_limited_tenants(tenant_ids)),
                                    ("tenants", (_BOOK_TENANTS, {"tenant_ids": tenant_ids})),
                                    ("rows", (_BOOK_ROWS, {"tenant_ids": tenant_ids}))):
                reads[name] = raw.cursor()
                reads[name].execute(*statement)
        read = raw.cursor()
        read.execute(_LIVE_NODES, {"node_ids": node_ids, "active": _ACTIVE})
        if tenant_ids:
            reads["usage"] = raw.cursor()
            reads["usage"].execute(*tenant_gpu_usage_rows(_book_tenants(tenant_ids)).query.sql_with_params())
    nodes = {}
    for row in locked.fetchall():
        node = LiveNode(*row)
        # Django has psycopg hand jsonb over as text (it parses JSON fields itself).
        node.labels = json.loads(node.labels) if isinstance(node.labels, str) else node.labels or {}
        node.internal_ip = node.internal_ip or ""
        nodes[node.id] = node
    for kind, node_id, rows in read.fetchall():
        node = nodes.get(node_id)
        if node is None:
            continue
        if kind == "cards":
            node.card_rows = rows
        else:
            node.placements = [LivePlacement(*row) for row in rows]
    quotas = QuotaBook()
    if tenant_ids:
        fill_book(quotas, reads["tenants"].fetchall(), reads["rows"].fetchall(), reads["usage"].fetchall())
    return LiveCluster(nodes=nodes, quotas=quotas)
