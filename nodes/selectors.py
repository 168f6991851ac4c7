"""Reads on nodes for the API and the pages."""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

import django_filters
from django.db import connection
from django.db.models import BooleanField, Count, ExpressionWrapper, OuterRef, Q, QuerySet, Subquery, Sum

from heteroflow_site.errors import DomainError
from nodes.agent.topology import TOPOLOGY_LABEL, decode_label, nvlink_domains
from nodes.models import GPU, GPU_TYPE_CHOICES, CardHealth, CardHealthEvent, Node, NodeAuditEntry, NodeChange
from nodes.services import JOIN_AWAITING_APPROVAL_ACTION


# Which tasks hold a node's cards is the scheduling app's to say: the routes that show them (scheduling.api.urls,
# scheduling.web.urls) hand its reader to the node views, so this app never imports the one above it. The reader
# answers {(card type, index): [task entry]}.
CardHolders = Callable[..., dict[tuple[str, int], list[dict]]]


def no_card_holders(*, node: Node, tenant_id: int | None) -> dict[tuple[str, int], list[dict]]:
    return {}


SharesReader = Callable[..., dict[int, Decimal]]
"""Per node id, the cards its fractional tasks hold (design §16.2): scheduling's to say, as it knows the tasks."""


def no_shares(*, node_ids: list[int]) -> dict[int, Decimal]:
    return {}


DrainReader = Callable[[Node], dict | None]
"""A node's drain progress (design §17.3): scheduling's to say, as it counts the tasks left."""


def no_drain_reader(node: Node) -> dict | None:
    return None


@dataclass(frozen=True)
class NodeMaintenance:
    """What the node page needs of scheduling to drain a node (design §17.3): its progress, and the drain and
    uncordon services (keyword arguments `node`, `actor`, and `grace_seconds` for the drain)."""

    progress: DrainReader
    drain: Callable[..., Node]
    uncordon: Callable[..., Node]


# How much of each card's health history the node page and API show.
CARD_HISTORY_SHOWN = 10


def card_health_history(node: Node) -> dict[tuple[str, int], list[dict]]:
    """Per card, its newest health events (reports, quarantines, releases), newest first."""
    history: dict[tuple[str, int], list[dict]] = {}
    for event in CardHealthEvent.objects.filter(node=node).select_related("actor").order_by("-at", "-id")[:500]:
        shown = history.setdefault((event.card_type, event.card_index), [])
        if len(shown) < CARD_HISTORY_SHOWN:
            shown.append({"kind": event.kind, "health": event.health, "errors": event.errors, "at": event.at,
                          "by": event.actor.username if event.actor_id else None})
    return history


class NodeFilter(django_filters.FilterSet):
    # A mixed node matches each type it has a card of, not only its majority type (design §15.3).
    gpu_type = django_filters.ChoiceFilter(choices=GPU_TYPE_CHOICES, method="_has_gpu_type")
    status = django_filters.ChoiceFilter(choices=Node.Status.choices)
    region = django_filters.CharFilter()
    zone = django_filters.CharFilter()
    rack = django_filters.CharFilter()
    schedulable = django_filters.BooleanFilter()

    class Meta:
        model = Node
        fields = ["gpu_type", "status", "region", "zone", "rack", "schedulable"]

    def _has_gpu_type(self, queryset, name, value):
        return queryset.filter(Q(gpu_type=value) | Q(id__in=GPU.objects.filter(type=value).values("node_id")))


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


def with_approval_state(nodes: QuerySet[Node]) -> QuerySet[Node]:
    """`nodes` with `awaiting_approval`, in the same query: registered with the join token and not made schedulable
    since (design §16.5), i.e. unschedulable and the newest audit entry that set `schedulable` is the join's own."""
    latest = (NodeAuditEntry.objects.filter(node=OuterRef("pk"))
              .filter(Q(action=JOIN_AWAITING_APPROVAL_ACTION) | Q(after__has_key="schedulable"))
              .order_by("-at", "-id").values("action")[:1])
    return nodes.annotate(approval_action=Subquery(latest)).annotate(
        awaiting_approval=ExpressionWrapper(Q(schedulable=False, approval_action=JOIN_AWAITING_APPROVAL_ACTION),
                                            output_field=BooleanField()))


def nodes_visible_to_tenant(tenant_id: int | None) -> QuerySet[Node]:
    """What a tenant user may look at: nodes not dedicated to another tenant."""
    return Node.objects.filter(dedicated_tenant__isnull=True) | Node.objects.filter(dedicated_tenant_id=tenant_id)


def node_places() -> dict[str, list[str]]:
    """The regions, zones and racks set on any node, each sorted: the choices of the node list's filters."""
    places = Node.objects.values_list("region", "zone", "rack")
    return {
        "regions": sorted({region for region, _, _ in places if region}),
        "zones": sorted({zone for _, zone, _ in places if zone}),
        "racks": sorted({rack for _, _, rack in places if rack}),
    }


def node_topology(node: Node) -> dict | None:
    """NVLink domains and per-card NUMA nodes from the agent's topology label; None without a readable label."""
    topology = decode_label(node.labels.get(TOPOLOGY_LABEL))
    if topology is None:
        return None
    return {
        "domains": nvlink_domains(topology),
        "numa": {str(card): numa for card, numa in sorted(topology.numa.items())},
    }


def node_detail(node: Node, *, card_holders: CardHolders = no_card_holders, tenant_id: int | None = None,
                drain_reader: DrainReader = no_drain_reader) -> dict:
    """Everything the node page and `GET /api/v1/nodes/{id}` show: figures, usage, cards with their active tasks
    (from `card_holders`), health and its history (design §17.3), labels, placement, the drain's progress and the
    NVLink/NUMA topology. With `tenant_id`, only that tenant's tasks are listed."""
    cards = list(node.gpus.all())
    tasks_by_card = card_holders(node=node, tenant_id=tenant_id)
    history = card_health_history(node)
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
        "taints": node.taints,
        # Addresses are for staff only (issue 13): a tenant has no business reaching nodes directly.
        "internal_ip": node.internal_ip if tenant_id is None else None,
        "public_ip": node.public_ip if tenant_id is None else None,
        "cpu_cores": node.cpu_cores,
        "memory_gb": node.memory_gb,
        "cpu_percent": node.cpu_percent,
        "memory_used_mb": node.memory_used_mb,
        "gpu_type": node.gpu_type,
        "card_types": card_type_counts([node.id]).get(node.id, []),
        "gpu_total": node.gpu_total,
        "gpu_used": node.gpu_used,
        "last_heartbeat_at": node.last_heartbeat_at,
        "drain": drain_reader(node),
        "unhealthy_cards": sum(1 for card in cards if card.health != CardHealth.OK or card.quarantined),
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
                "active_tasks": tasks_by_card.get((card.type, card.index), []),
                "health": card.health,
                "last_error": card.last_error,
                "quarantined": card.quarantined,
                "quarantined_at": card.quarantined_at,
                "quarantine_reason": card.quarantine_reason,
                "health_history": history.get((card.type, card.index), []),
            }
            for card in cards
        ],
    }


def unhealthy_card_counts(node_ids: list[int]) -> dict[int, dict]:
    """Per node with any, its quarantined cards and the cards reporting degraded or failed: the nodes list's flag."""
    counts: dict[int, dict] = {}
    rows = (GPU.objects.filter(node_id__in=node_ids).filter(Q(quarantined_at__isnull=False) | ~Q(health=CardHealth.OK))
            .order_by().values("node_id")
            .annotate(quarantined=Count("id", filter=Q(quarantined_at__isnull=False)),
                      degraded=Count("id", filter=Q(health=CardHealth.DEGRADED)),
                      failed=Count("id", filter=Q(health=CardHealth.FAILED))))
    for row in rows:
        counts[row["node_id"]] = {name: row[name] for name in ("quarantined", "degraded", "failed")}
    return counts


def card_type_counts(node_ids: list[int]) -> dict[int, list[dict]]:
    """Per node, how many cards of each type it reported (a mixed node has several), most numerous first."""
    counts: dict[int, list[dict]] = {}
    rows = (GPU.objects.filter(node_id__in=node_ids).order_by().values("node_id", "type")
            .annotate(total=Count("id")).order_by("node_id", "-total", "type"))
    for row in rows:
        counts.setdefault(row["node_id"], []).append({"type": row["type"], "total": row["total"]})
    return counts


def node_usage(node: Node) -> dict:
    """Usage fractions as spread and binpack read them (CPU %, memory of total, GPUs held of total); None when
    unknown."""
    return {
        "cpu": node.cpu_percent / 100,
        "memory": node.memory_used_mb / (node.memory_gb * 1024) if node.memory_gb else None,
        "gpu": node.gpu_used / node.gpu_total if node.gpu_total else None,
    }


QUARANTINED = "quarantined"
CARD_STATES = (CardHealth.OK, CardHealth.DEGRADED, CardHealth.FAILED, QUARANTINED)


def card_health_counts() -> dict[tuple[str, str], int]:
    """Cards per (type, state), each card in one state: `quarantined` while it is, else its reported health
    (design §17.3) — the one reading for the dashboard and `heteroflow_gpu_health`."""
    rows = (GPU.objects.order_by().values("type")
            .annotate(quarantined=Count("id", filter=Q(quarantined_at__isnull=False)),
                      **{state: Count("id", filter=Q(quarantined_at__isnull=True, health=state))
                         for state in CardHealth.values}))
    return {(row["type"], state): row[state] for row in rows for state in CARD_STATES}


def capacity_by_architecture() -> list[dict]:
    """Cards per GPU architecture: used (the ledger of reachable nodes), free on reachable nodes, cards on offline
    nodes and quarantined cards (never free, design §17.3) — the one reading of it, for the dashboard and Prometheus
    alike."""
    offline = Q(status=Node.Status.OFFLINE)
    rows = (
        Node.objects.exclude(gpu_type="").values("gpu_type")
        .annotate(total=Sum("gpu_total"), used=Sum("gpu_used", filter=~offline),
                  offline=Sum("gpu_total", filter=offline), nodes=Count("id"))
        .order_by("gpu_type")
    )
    quarantined = dict(GPU.objects.filter(quarantined_at__isnull=False).exclude(node__status=Node.Status.OFFLINE)
                       .order_by().values_list("node__gpu_type").annotate(n=Count("id")))
    result = []
    for row in rows:
        used, offline_cards = row["used"] or 0, row["offline"] or 0
        held_back = quarantined.get(row["gpu_type"], 0)
        free = max(row["total"] - used - offline_cards - held_back, 0)
        result.append({"architecture": row["gpu_type"], "total": row["total"], "used": used, "free": free,
                       "offline": offline_cards, "quarantined": held_back, "nodes": row["nodes"]})
    return result


def cluster_gpu_types() -> set[str]:
    """Every GPU type the cluster has: each registered node's type and its cards' (a mixed node's minority types
    too), in one query."""
    node_types = Node.objects.exclude(gpu_type="").order_by().values_list("gpu_type", flat=True)
    card_types = GPU.objects.exclude(type="").order_by().values_list("type", flat=True)
    return set(node_types.union(card_types))


def nodes_by_status() -> list[dict]:
    counts = dict(Node.objects.values_list("status").annotate(n=Count("id")).order_by())
    return [{"status": value, "count": counts.get(value, 0)} for value, _ in Node.Status.choices]


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
              WHERE (%(since)s::pg_snapshot IS NULL
                     OR (xid >= pg_snapshot_xmin(%(since)s::pg_snapshot)::text::bigint
                         AND NOT pg_visible_in_snapshot(xid::text::xid8, %(since)s::pg_snapshot))
                     OR xid = pg_current_xact_id_if_assigned()::text::bigint)
                AND xid <> ALL(%(own)s::bigint[]))
"""


def change_watermark() -> str:
    """A watermark for `nodes_changed_since` without asking what changed: taken before reading every node."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_snapshot()::text")
        return cursor.fetchone()[0]


def nodes_changed_since(*, since: str | None, own_transactions: Iterable[int] = ()) -> NodeChanges:
    """The nodes whose row, cards, placements or labels changed in transactions that the look which returned
    `since` as its watermark did not see (None: every change still in the log), other than `own_transactions`
    (the reader's own, whose changes it already holds).

    The watermark is the look's snapshot, not a counter: transactions commit out of order, and a change whose
    transaction began before the look but committed after it is exactly one the snapshot did not see.
    """
    with connection.cursor() as cursor:
        cursor.execute(_CHANGED_SINCE, {"since": since, "own": sorted(own_transactions)})
        watermark, node_ids = cursor.fetchone()
    return NodeChanges(node_ids=frozenset(node_ids), watermark=watermark)
