"""The weighted queue order (design §16.3, seed 002; the `queue-sort` plugin's `weighted`): the cycle's window of
entries reordered by `queue_sort.weighted_score`, highest first (a stable sort: ties keep the priority order). One
query for the entries' deadlines and cards; the cluster's cards by GPU type come from the cycle's snapshot."""

from collections import Counter
from datetime import datetime

from django.db.models import Min, Q
from django.utils import timezone

from scheduling import lifecycle
from scheduling.framework.snapshot import ClusterSnapshot
from scheduling.models import Task, TaskGroup
from scheduling.plugins.queue_sort import Cards, EntryFacts, weighted_score
from scheduling.queue.entries import GANG, TASK, QueueEntry


def weighted_order(entries: list[QueueEntry], snapshot: ClusterSnapshot, *,
                   now: datetime | None = None) -> list[QueueEntry]:
    now = now or timezone.now()
    cards = cards_by_type(snapshot)
    facts = entry_facts(entries)
    return sorted(entries, key=lambda entry: -weighted_score(facts[entry.key], now=now, cards=cards))


def cards_by_type(snapshot: ClusterSnapshot) -> dict[str, Cards]:
    """Allocated and total cards per GPU type (lower case) over the available nodes, and "" for all of them."""
    allocated, total = Counter(), Counter()
    for node in snapshot.nodes:
        for card in node.cards:
            kind = card.type or node.gpu_type
            for key in (kind, ""):
                total[key] += 1
                allocated[key] += not card.is_free
    return {kind: Cards(allocated[kind], total[kind]) for kind in total}


def entry_facts(entries: list[QueueEntry]) -> dict[tuple, EntryFacts]:
    """Each entry's facts by its `key`; a gang's cards are all its members' (a multi-node replica's, its own)."""
    task_ids = [entry.id for entry in entries if entry.kind == TASK]
    group_ids = [entry.id for entry in entries if entry.kind == GANG]
    tasks = {task_id: rest for task_id, *rest in Task.objects.filter(id__in=task_ids).values_list(
        "id", "deadline", "gpu_type", "gpu_required")}
    groups = {group_id: rest for group_id, *rest in (
        TaskGroup.objects.filter(id__in=group_ids)
        .annotate(deadline=Min("members__deadline", filter=Q(members__status=lifecycle.PENDING)))
        .values_list("id", "deadline", "gpu_type", "world_size", "nodes_per_replica", "gpus_per_worker"))}
    facts = {}
    for entry in entries:
        if entry.kind == TASK and entry.id in tasks:
            deadline, gpu_type, cards = tasks[entry.id]
        elif entry.kind == GANG and entry.id in groups:
            deadline, gpu_type, world_size, nodes_per_replica, per_worker = groups[entry.id]
            cards = (world_size if entry.replica is None else nodes_per_replica) * per_worker
        else:
            continue
        facts[entry.key] = EntryFacts(entry.priority, entry.created_at, deadline, gpu_type, cards)
    return facts
