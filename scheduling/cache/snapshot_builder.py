"""Builds the scheduler's in-memory view of the cluster from the database, once per cycle.

A fixed handful of queries whatever the cluster size (nodes, cards, active placements, share groups): never one
query per node. Plugins then read the snapshot and never the ORM.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import fields

from django.db.models import BooleanField, ExpressionWrapper, Q

from nodes.models import GPU, Node
from scheduling.cache.node_info import assemble_node
from scheduling.fair_share.quotas import inactive_tenant_ids, load_quota_book
from scheduling.framework.group_spread import GroupSpread
from scheduling.framework.occupancy import Occupant
from scheduling.framework.snapshot import CardInfo, ClusterSnapshot, NodeInfo, TaskInfo, TenancyView
from scheduling.framework.table import READ
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task, TaskGroup
from tenants.models import ShareGroup

_NODE_FIELDS = (
    "id", "name", "status", "schedulable", "dedicated_tenant_id", "region", "zone", "rack", "labels", "gpu_type",
    "gpu_total", "gpu_used", "cpu_cores", "memory_gb", "cpu_percent", "memory_used_mb", "internal_ip", "public_ip",
    "taints",
)
_CARD_FIELDS = (
    "node_id", "index", "uuid", "type", "model", "memory_total_mb", "memory_used_mb", "utilization", "temperature",
    "numa", "health", "quarantined",
)
_PLACEMENT_FIELDS = ("node_id", "tenant_id", "type", "gpus", "shard", "gpu_memory_mb", "card_type", "cpu_cores",
                     "memory_mb")
TASK_INFO_FIELDS = (
    "id", "tenant_id", "name", "type", "gpu_type", "gpu_required", "gpu_memory_mb", "gpu_compute_percent",
    "cpu_cores", "memory_mb", "priority", "preemptible", "labels", "created_at", "group_id",
    "tolerations", "node_selector", "image", "model",
)


def _check_positional(dataclass_type, names: tuple[str, ...]) -> None:
    declared = tuple(item.name for item in fields(dataclass_type))[: len(names)]
    if declared != names:
        raise ImportError(f"{dataclass_type.__name__} fields changed: {declared} != {names}")


_check_positional(NodeInfo, _NODE_FIELDS)
_check_positional(CardInfo, _CARD_FIELDS[1:])


def build_snapshot() -> ClusterSnapshot:
    """Every node (whatever its state, so diagnostics can name why it was passed over) with cards and occupancy.
    A scheduling cycle takes its snapshot from the process's cache instead (`scheduling.cache.snapshot_cache`)."""
    nodes = read_nodes()
    return ClusterSnapshot(nodes=nodes, tenancy=build_tenancy(nodes))


def prepare_admission(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """THE setup of a snapshot that tasks are scheduled on (the cycle's and the what-if previews'): what the
    PreFilters read — the quota book with the usage of the tenants it limits, and the inactive tenants."""
    snapshot.quotas = load_quota_book(limited_only=True, nodes=snapshot.nodes)
    snapshot.inactive_tenant_ids = inactive_tenant_ids()
    snapshot.group_spread = read_group_spread(snapshot.nodes)
    return snapshot


def read_group_spread(nodes: Iterable[NodeInfo]) -> dict[int, GroupSpread]:
    """The live inference groups that spread their replicas, each with its placed replicas counted per domain: two
    queries."""
    spreads = {group_id: GroupSpread(across=spread["across"], max_skew=int(spread.get("max_skew", 1)),
                                     hard=bool(spread.get("hard", False)))
               for group_id, spread in TaskGroup.objects.filter(spread__isnull=False, stopped_at__isnull=True)
               .values_list("id", "spread")}
    if not spreads:
        return spreads
    by_id = {node.id: node for node in nodes}
    for group_id, node_id in _active_placements().filter(group_id__in=list(spreads)).values_list("group_id",
                                                                                                  "node_id"):
        if node_id in by_id:
            spreads[group_id].placed(by_id[node_id])
    return spreads


def read_nodes(*, node_ids: list[int] | None = None, occupied: bool = True) -> list[NodeInfo]:
    """The nodes (all, or those of `node_ids` that exist) in id order, with cards and occupancy (none of it with
    `occupied=False`): three queries."""
    node_rows = Node.objects.order_by("id")
    card_rows = GPU.objects.order_by("node_id", "index").annotate(
        quarantined=ExpressionWrapper(Q(quarantined_at__isnull=False), output_field=BooleanField()))
    placement_rows = _active_placements() if occupied else Task.objects.none()
    if node_ids is not None:
        node_rows = node_rows.filter(id__in=node_ids)
        card_rows = card_rows.filter(node_id__in=node_ids)
        placement_rows = placement_rows.filter(node_id__in=node_ids)
    return _assemble_nodes(node_rows.values_list(*_NODE_FIELDS), card_rows.values_list(*_CARD_FIELDS),
                           placement_rows.values_list(*_PLACEMENT_FIELDS))


def refresh_nodes(snapshot: ClusterSnapshot, node_ids: Iterable[int]) -> None:
    """Bring nodes of the snapshot back in line with the database after live data proved them stale (binds
    refused because another instance took their cards, a heartbeat crossed a threshold), so the rest of the cycle
    stops choosing them on stale figures. Updated in place, their table rows refreshed, in three queries."""
    wanted = sorted({node_id for node_id in node_ids if snapshot.node(node_id) is not None})
    if not wanted:
        return
    table = snapshot.table
    rows = []
    for fresh in read_nodes(node_ids=wanted):
        node = snapshot.node(fresh.id)
        update_in_place(node, fresh)
        if table is not None and table.row_of.get(node.id) is not None and table.nodes[table.row_of[node.id]] is node:
            rows.append(table.row_of[node.id])
    if table is not None:
        table.refresh_rows(rows, cause=READ)


def update_in_place(node: NodeInfo, fresh: NodeInfo) -> None:
    """Make `node` what `fresh` (the same node read again) says, keeping the object others hold."""
    for name, value in vars(fresh).items():
        if name != "cache":
            setattr(node, name, value)
    node.cache.clear()


def build_tenancy(nodes: Iterable[NodeInfo]) -> TenancyView:
    groups_of: dict[int, set[int]] = defaultdict(set)
    for tenant_id, group_id in ShareGroup.tenants.through.objects.values_list("tenant_id", "sharegroup_id"):
        groups_of[tenant_id].add(group_id)
    return TenancyView(
        groups_of={tenant_id: frozenset(groups) for tenant_id, groups in groups_of.items()},
        dedicated_tenant_ids=frozenset(node.dedicated_tenant_id for node in nodes if node.dedicated_tenant_id),
    )


def task_info_from_row(row: tuple) -> TaskInfo:
    """A TaskInfo from a `values_list(*TASK_INFO_FIELDS)` row."""
    info = TaskInfo(**dict(zip(TASK_INFO_FIELDS, row)))
    info.labels = info.labels or {}
    info.tolerations = info.tolerations or []
    info.node_selector = info.node_selector or {}
    return info


def task_info_from_task(task: Task) -> TaskInfo:
    """A TaskInfo from a task already read whole (a view's, an API request's)."""
    return task_info_from_row(tuple(getattr(task, field) for field in TASK_INFO_FIELDS))


def newest_tasks(count: int) -> list[TaskInfo]:
    """The `count` most recently created tasks (any state), oldest first."""
    rows = Task.objects.order_by("-created_at", "-id").values_list(*TASK_INFO_FIELDS)[:count]
    return [task_info_from_row(row) for row in reversed(rows)]


def _active_placements():
    return Task.objects.filter(status__in=ACTIVE_STATES, node_id__isnull=False)


def _assemble_nodes(node_rows, card_rows, placement_rows) -> list[NodeInfo]:
    # Positional construction (the field lists above follow the dataclasses' field order, checked at import):
    # a 5,000-node cluster has some 20,000 cards and this runs every cycle.
    nodes: dict[int, NodeInfo] = {}
    for row in node_rows:
        node = NodeInfo(*row)
        if node.labels is None:
            node.labels = {}
        if node.taints is None:
            node.taints = []
        nodes[node.id] = node
    cards_of: dict[int, list[CardInfo]] = defaultdict(list)
    for row in card_rows:
        cards_of[row[0]].append(CardInfo(*row[1:]))
    occupants_of: dict[int, list[Occupant]] = defaultdict(list)
    for node_id, tenant_id, task_type, gpus, shard, gpu_memory_mb, card_type, cpu_cores, memory_mb in placement_rows:
        occupants_of[node_id].append(Occupant.of_row(
            tenant_id=tenant_id, task_type=task_type, gpus=gpus, shard=shard, gpu_memory_mb=gpu_memory_mb,
            card_type=card_type, cpu_cores=cpu_cores, memory_mb=memory_mb))
    return [assemble_node(node, cards_of.get(node_id, ()), occupants_of.get(node_id, ()))
            for node_id, node in nodes.items()]
