"""Reads on nodes for the API, the pages and the node agent."""

from collections.abc import Mapping
from dataclasses import dataclass

import django_filters
from django.db import connection
from django.db.models import QuerySet

from heteroflow_site.errors import DomainError
from nodes.agent.topology import TOPOLOGY_LABEL, decode_label, nvlink_domains
from nodes.models import GPU_TYPE_CHOICES, Node, NodeChange
from scheduling import lifecycle
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task


class NodeFilter(django_filters.FilterSet):
    gpu_type = django_filters.ChoiceFilter(choices=GPU_TYPE_CHOICES)
    status = django_filters.ChoiceFilter(choices=Node.Status.choices)
    region = django_filters.CharFilter()
    zone = django_filters.CharFilter()
    rack = django_filters.CharFilter()
    schedulable = django_filters.BooleanFilter()

    class Meta:
        model = Node
        fields = ["gpu_type", "status", "region", "zone", "rack", "schedulable"]


def nodes_list(filters: Mapping | None = None, *, queryset: QuerySet[Node] | None = None) -> QuerySet[Node]:
    """Nodes matching `filters` (query parameters: gpu_type, status, region, zone, rack, schedulable).

    An invalid filter value raises DomainError naming the parameter.
    """
    base = (queryset if queryset is not None else Node.objects.all()).select_related("dedicated_tenant")
    filterset = NodeFilter(filters or {}, queryset=base)
    if not filterset.is_valid():
        field, messages = next(iter(filterset.errors.items()))
        raise DomainError(" ".join(messages), field=field)
    return filterset.qs


def nodes_visible_to_tenant(tenant_id: int | None) -> QuerySet[Node]:
    """What a tenant user may look at: nodes not dedicated to another tenant."""
    return Node.objects.filter(dedicated_tenant__isnull=True) | Node.objects.filter(dedicated_tenant_id=tenant_id)


def node_topology(node: Node) -> dict | None:
    """NVLink domains and per-card NUMA nodes from the agent's topology label; None without a readable label."""
    topology = decode_label(node.labels.get(TOPOLOGY_LABEL))
    if topology is None:
        return None
    return {
        "domains": nvlink_domains(topology),
        "numa": {str(card): numa for card, numa in sorted(topology.numa.items())},
    }


def node_detail(node: Node, *, tenant_id: int | None = None) -> dict:
    """Everything the node page and `GET /api/v1/nodes/{id}` show: figures, usage, cards with their active tasks,
    labels, placement and the NVLink/NUMA topology. With `tenant_id`, only that tenant's tasks are listed."""
    cards = list(node.gpus.all())
    active = Task.objects.filter(node=node, status__in=ACTIVE_STATES).select_related("tenant").order_by("id")
    if tenant_id is not None:
        active = active.filter(tenant_id=tenant_id)
    tasks_by_card: dict[int, list[dict]] = {card.index: [] for card in cards}
    for task in active:
        entry = {"id": task.id, "name": task.name, "tenant": task.tenant.name, "status": task.status,
                 "gpu_required": task.gpu_required, "gpu_memory_mb": task.gpu_memory_mb,
                 "fractional": task.is_fractional}
        for index in _cards_held(task):
            tasks_by_card.setdefault(index, []).append(entry)
    topology = node_topology(node)
    numa_from_label = topology["numa"] if topology else {}
    return {
        "id": node.id,
        "name": node.name,
        "status": node.status,
        "schedulable": node.schedulable,
        "dedicated_tenant": node.dedicated_tenant_id,
        "dedicated_tenant_name": node.dedicated_tenant.name if node.dedicated_tenant_id else None,
        "region": node.region,
        "zone": node.zone,
        "rack": node.rack,
        "labels": node.labels,
        "internal_ip": node.internal_ip,
        "public_ip": node.public_ip,
        "cpu_cores": node.cpu_cores,
        "memory_gb": node.memory_gb,
        "cpu_percent": node.cpu_percent,
        "memory_used_mb": node.memory_used_mb,
        "gpu_type": node.gpu_type,
        "gpu_total": node.gpu_total,
        "gpu_used": node.gpu_used,
        "last_heartbeat_at": node.last_heartbeat_at,
        "usage": node_usage(node),
        "topology": topology,
        "cards": [
            {
                "index": card.index,
                "uuid": card.uuid,
                "type": card.type,
                "model": card.model,
                "memory_total_mb": card.memory_total_mb,
                "memory_used_mb": card.memory_used_mb,
                "utilization": card.utilization,
                "temperature": card.temperature,
                "numa": numa_from_label.get(str(card.index), card.numa),
                "active_tasks": tasks_by_card.get(card.index, []),
            }
            for card in cards
        ],
    }


def node_usage(node: Node) -> dict:
    """Usage fractions in the sense of SPEC §6 (CPU %, memory of total, GPUs held of total); None when unknown."""
    return {
        "cpu": node.cpu_percent / 100,
        "memory": node.memory_used_mb / (node.memory_gb * 1024) if node.memory_gb else None,
        "gpu": node.gpu_used / node.gpu_total if node.gpu_total else None,
    }


def _cards_held(task: Task) -> list[int]:
    if task.gpus:
        return list(task.gpus)
    if task.shard and task.shard.get("card") is not None:
        return [task.shard["card"]]
    return []


def agent_work(node: Node) -> dict:
    """What the node's agent must do now (SPEC §14): start its scheduled tasks, stop its stopping/preempting ones."""
    to_start = Task.objects.filter(node=node, status=lifecycle.SCHEDULED).order_by("-priority", "created_at", "id")
    to_stop = Task.objects.filter(node=node, status__in=[lifecycle.STOPPING, lifecycle.PREEMPTING]).order_by("id")
    return {
        "start": [
            {
                "id": task.id,
                "name": task.name,
                "image": task.image,
                "command": task.command,
                "type": task.type,
                "gpu_type": task.gpu_type,
                "gpus": list(task.gpus),
                "port": task.port,
                "env": _container_env(task),
                "labels": task.labels,
                "priority": task.priority,
            }
            for task in to_start
        ],
        "stop": [{"id": task.id, "status": task.status} for task in to_stop.only("id", "status")],
    }


def _container_env(task: Task) -> dict[str, str]:
    shard_env = (task.shard or {}).get("env") or {}
    return {**task.env, **{key: str(value) for key, value in shard_env.items()}}


@dataclass(frozen=True)
class NodeChanges:
    node_ids: frozenset[int]
    # The look's snapshot (`pg_snapshot` text): pass it back as `since` next time.
    watermark: str


# Not visible to the earlier snapshot = in progress then or begun since. The xmin bound lets the index skip the
# log's older part; the visibility test keeps changes that snapshot already saw out, long transactions or not.
# The reader's own transaction counts as visible to its snapshots, but it may go on changing nodes after a look:
# its changes are always returned.
_CHANGED_SINCE = f"""
SELECT pg_current_snapshot()::text,
       ARRAY(SELECT DISTINCT node_id FROM {NodeChange._meta.db_table}
              WHERE %(since)s::pg_snapshot IS NULL
                 OR (xid >= pg_snapshot_xmin(%(since)s::pg_snapshot)::text::bigint
                     AND NOT pg_visible_in_snapshot(xid::text::xid8, %(since)s::pg_snapshot))
                 OR xid = pg_current_xact_id_if_assigned()::text::bigint)
"""


def nodes_changed_since(*, since: str | None) -> NodeChanges:
    """The nodes whose row, cards, placements or labels changed in transactions that the look which returned
    `since` as its watermark did not see (None: every change still in the log).

    The watermark is the look's snapshot, not a counter: transactions commit out of order, and a change whose
    transaction began before the look but committed after it is exactly one the snapshot did not see.
    """
    with connection.cursor() as cursor:
        cursor.execute(_CHANGED_SINCE, {"since": since})
        watermark, node_ids = cursor.fetchone()
    return NodeChanges(node_ids=frozenset(node_ids), watermark=watermark)
