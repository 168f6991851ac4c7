"""Reservation (design §16.3, no starvation): a pending job of at least 2 cards that has waited longer than
`SCHEDULER["reserve_after"]` and heads its priority band becomes its GPU type's reserved job — one per type at a
time, oldest first. The node closest to fitting it is held for it with the nomination mechanism
(`scheduling.queue.nomination`: `Task.nominated_node`, the cards there held each cycle): cards freed there go to no
other task until it binds or leaves the queue. Other tasks that would have fitted in the held cards are refused
there with `Reserved` (`framework.builtin_filters.ReservationFilter`).

Gangs are not reserved yet: their members are placed whole by the gang planner, which holds no cards.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from nodes.taints import NO_SCHEDULE, selector_matches, untolerated
from scheduling import lifecycle
from scheduling.framework.cards import card_groups
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, TaskInfo
from scheduling.framework.table import AVAILABLE_STATUSES
from scheduling.models import Task
from scheduling.snapshot_builder import TASK_INFO_FIELDS, task_info_from_row

MIN_CARDS = 2


def reserve_waiting_jobs(snapshot: ClusterSnapshot, *, now: datetime | None = None) -> dict[str, int]:
    """Keep one reserved job per GPU type, each nominated on the node closest to fitting it; GPU type → task id."""
    now = now or timezone.now()
    pending = Task.objects.filter(status=lifecycle.PENDING)
    reserved: dict[str, int] = {}
    for row in pending.filter(reserved_at__isnull=False).order_by("reserved_at", "id").values_list(
            "nominated_node_id", *TASK_INFO_FIELDS):
        task = task_info_from_row(tuple(row[1:]))
        kind = task.gpu_type.lower()
        if kind in reserved:
            # A second reserved job of the type (two instances raced): the younger one waits its turn again.
            Task.objects.filter(id=task.id, status=lifecycle.PENDING).update(reserved_at=None, nominated_node=None)
            continue
        reserved[kind] = task.id
        node = snapshot.node(row[0]) if row[0] is not None else None
        if node is None or not may_hold(task, node):
            _nominate(task, snapshot)
    waited = now - timedelta(seconds=settings.SCHEDULER["reserve_after"])
    heads = dict(pending.filter(group__isnull=True).values_list("gpu_type").annotate(top=Max("priority"))
                 .order_by())
    candidates = (pending.filter(group__isnull=True, gpu_required__gte=MIN_CARDS, created_at__lte=waited,
                                 reserved_at__isnull=True)
                  .exclude(gpu_type__in=[kind for kind in reserved])
                  .order_by("created_at", "id").values_list(*TASK_INFO_FIELDS))
    for row in candidates:
        task = task_info_from_row(row)
        kind = task.gpu_type.lower()
        if kind in reserved or task.priority < heads.get(task.gpu_type, task.priority):
            continue
        node_id = _nominate(task, snapshot, reserved_at=now)
        if node_id is not None:
            reserved[kind] = task.id
    return reserved


def _nominate(task: TaskInfo, snapshot: ClusterSnapshot, *, reserved_at: datetime | None = None) -> int | None:
    node = closest_node(task, snapshot)
    if node is None:
        return None
    changes = {"nominated_node_id": node.id}
    if reserved_at is not None:
        changes["reserved_at"] = reserved_at
    won = Task.objects.filter(id=task.id, status=lifecycle.PENDING).update(**changes)
    return node.id if won else None


def may_hold(task: TaskInfo, node: NodeInfo) -> bool:
    """The node could take the task once emptied: available, not cordoned, not dedicated to another tenant, its
    pools admit it, and one of its card groups (type, `gpu-model`) has enough cards."""
    if node.status not in AVAILABLE_STATUSES or not node.schedulable:
        return False
    if node.dedicated_tenant_id not in (None, task.tenant_id):
        return False
    if node.taints and untolerated(node.taints, task.tolerations, NO_SCHEDULE):
        return False
    if task.node_selector and not selector_matches(task.node_selector, node.labels):
        return False
    return any(len(cards) >= task.gpu_required for _, cards in card_groups(task, node))


def closest_node(task: TaskInfo, snapshot: ClusterSnapshot) -> NodeInfo | None:
    """Of the nodes that may hold the task, the one with the most free cards in one of its card groups (the fewest
    cards still to free), then the lowest id. A card group has at most its node's free cards (the ledger), so the
    nodes are read most free first and the search ends at the first node that cannot beat the best found: on a
    large cluster only a few nodes are looked at closely."""
    best, best_free = None, -1
    for node in sorted(snapshot.nodes, key=lambda node: (-node.free_gpus, node.id)):
        if node.free_gpus < best_free:
            break
        if not may_hold(task, node):
            continue
        free = max(sum(card.is_free for card in cards) for _, cards in card_groups(task, node)
                   if len(cards) >= task.gpu_required)
        if free > best_free or free == best_free and node.id < best.id:
            best, best_free = node, free
    return best
