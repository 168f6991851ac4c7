"""Reservation (design §16.3, no starvation): a pending job of at least 2 cards — a task, or a gang with all its
members pending — that has waited longer than `SCHEDULER["reserve_after"]` and heads its priority band becomes its GPU
type's reserved job — one per type at a time, oldest first. Only a job its PreFilters admit (its tenant active, its
quota: the framework's `pre_filter`) becomes or stays reserved, and only such jobs head a band: a job no node could
serve yet must not block a GPU type for everyone else. The node closest to fitting it (for a gang, each
member's) is held for it with the nomination mechanism (`scheduling.queue.nomination`: `Task.nominated_node`, the
cards there held each cycle, with the host CPU and memory the job asks): cards freed there go to no other task until
it binds or leaves the queue. A single job moves to another node that has come to have strictly more free cards for
it (`closer_node`), unless defrag's moves are emptying its node. Other tasks
that would have fitted in the held cards are refused there with `Reserved`
(the always-on `reservation` plugin, `scheduling/plugins/reservation/`). A gang's members are reserved and nominated together, each on its
own node (several may share one); the gang planner sees their held cards free during the gang's attempt
(`groups.gang_bind`).
"""

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import cache, partial

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from scheduling import lifecycle
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, task_info_from_row
from scheduling.framework.cards import card_groups
from scheduling.framework.framework import Framework
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, TaskInfo
from scheduling.models import Task, TaskGroup, TaskType

MIN_CARDS = 2
# Whether a node could take a task once emptied (`Framework.once_emptied`).
HoldCheck = Callable[[TaskInfo, NodeInfo], bool]
# Rows of the queue read at a time when looking for the head of a priority band.
_HEAD_BATCH = 50


class _Lost(Exception):
    """A member left the queue while its gang was being nominated."""


def reserve_waiting_jobs(snapshot: ClusterSnapshot, framework: Framework, *,
                         now: datetime | None = None) -> dict[str, int]:
    """Keep one reserved job per GPU type, each nominated on the node(s) closest to fitting it; GPU type → task id
    (a gang's: its first member's). `snapshot` carries the cycle's quota book and inactive tenants, which the
    framework's PreFilters read."""
    now = now or timezone.now()
    pending = Task.objects.filter(status=lifecycle.PENDING)
    # Read in that order by every search of this call, when one is made: the snapshot does not change before the
    # cycle places its tasks.
    order = cache(partial(most_free_first, snapshot))
    could_hold = framework.once_emptied(snapshot)
    admitted = partial(_admitted, framework, snapshot)
    jobs: dict[tuple, list[tuple[int | None, TaskInfo]]] = {}
    for row in pending.filter(reserved_at__isnull=False).order_by("reserved_at", "id").values_list(
            "nominated_node_id", *TASK_INFO_FIELDS):
        task = task_info_from_row(tuple(row[1:]))
        jobs.setdefault(_job_key(task), []).append((row[0], task))
    whole = _whole_gangs({key[1] for key in jobs if key[0] == "gang"})
    reserved: dict[str, int] = {}
    for key, held in jobs.items():
        members = [task for _, task in held]
        kind = members[0].gpu_type
        if kind in reserved or key[0] == "gang" and key[1] not in whole or not admitted(members):
            # A second reserved job of the type (two instances raced), a gang no longer whole, or a job its PreFilters
            # now refuse (over its quota, its tenant inactive): it waits its turn again.
            Task.objects.filter(id__in=[task.id for task in members], status=lifecycle.PENDING).update(
                reserved_at=None, nominated_node=None)
            continue
        reserved[kind] = members[0].id
        if any(not _still_holds(task, node_id, snapshot, could_hold) for node_id, task in held):
            _nominate(members, order(), could_hold)
        elif len(held) == 1 and (node := closer_node(members[0], held[0][0], snapshot, could_hold,
                                                     order=order())) is not None \
                and not _moves_stopping_for(members[0].id):
            # Another node has become closer to fitting it than the one it holds (whose occupants may run for
            # hours): it holds that one instead. The held node never loses free cards, so each change strictly
            # raises what it holds and the job moves at most once per card. Not while defrag's moves empty its node.
            Task.objects.filter(id=members[0].id, status=lifecycle.PENDING).update(nominated_node_id=node.id)
    waited = now - timedelta(seconds=settings.SCHEDULER["reserve_after"])
    heads: dict[str, int] = {}
    for gpu_type, top, read_tasks in _candidates(pending, waited, exclude=list(reserved)):
        kind = gpu_type
        if kind in reserved:
            continue
        if gpu_type not in heads:
            heads[gpu_type] = _top_priority(pending, gpu_type, admitted, default=top)
        if top < heads[gpu_type]:
            continue
        members = read_tasks()
        if members and admitted(members) and _nominate(members, order(), could_hold, reserved_at=now):
            reserved[kind] = members[0].id
    return reserved


def _admitted(framework: Framework, snapshot: ClusterSnapshot, members: list[TaskInfo]) -> bool:
    """The job's PreFilters admit it (a gang's once, with its totals)."""
    return framework.pre_filter_gang(members, snapshot).is_success


def _top_priority(pending, gpu_type: str, admitted: Callable[[list[TaskInfo]], bool], *, default: int) -> int:
    """The highest priority of the type's pending tasks that their PreFilters admit: the queue's index read from
    its head down, a few rows at a time, to the first such task of the type (grouping every pending task by type
    would read them all each cycle)."""
    rows = pending.filter(gpu_type=gpu_type).order_by("-priority", "id").values_list(*TASK_INFO_FIELDS)
    start = 0
    while batch := list(rows[start:start + _HEAD_BATCH]):
        for row in batch:
            task = task_info_from_row(row)
            if admitted([task]):
                return task.priority
        start += _HEAD_BATCH
    return default


def _moves_stopping_for(job_id: int) -> bool:
    """Defrag's moves for the job are still stopping (its node is being emptied for it)."""
    from scheduling.preemption.moves import stopping_for   # moves plans with reservation's helpers
    return bool(stopping_for(job_id))


def _job_key(task: TaskInfo) -> tuple:
    return ("gang", task.group_id) if task.group_id is not None else ("task", task.id)


def _still_holds(task: TaskInfo, node_id: int | None, snapshot: ClusterSnapshot, could_hold: HoldCheck) -> bool:
    node = snapshot.node(node_id) if node_id is not None else None
    return node is not None and could_hold(task, node)


def _gangs():
    """Training groups placed whole (design §10) that may be waiting, with their pending members counted."""
    return (TaskGroup.objects.filter(type=TaskType.TRAINING, world_size__gt=1,
                                     status__in=(TaskGroup.Status.PENDING, TaskGroup.Status.RESTARTING))
            .annotate(pending=Count("members", filter=Q(members__status=lifecycle.PENDING))))


def _whole_gangs(group_ids: set[int]) -> set[int]:
    """Of these groups, the gangs whose members are all pending."""
    if not group_ids:
        return set()
    return set(_gangs().filter(id__in=group_ids, pending=F("world_size")).values_list("id", flat=True))


def _candidates(pending, waited: datetime, *,
                exclude: list[str]) -> list[tuple[str, int, Callable[[], list[TaskInfo]]]]:
    """The jobs that may become reserved, oldest first, each as its GPU type, its highest priority and how to read
    its tasks: single tasks and whole gangs of at least `MIN_CARDS` cards submitted before `waited`, of GPU types
    without a reserved job. A single task is read whole only when its turn comes: most candidates are passed over
    (their type got its job), and decoding every waiting big task's labels and tolerations each cycle would cost a
    tenth of a 5,000-node cycle with a deep queue."""
    singles = (pending.filter(group__isnull=True, gpu_required__gte=MIN_CARDS, created_at__lte=waited,
                              reserved_at__isnull=True).exclude(gpu_type__in=exclude)
               .values_list("created_at", "id", "gpu_type", "priority"))
    jobs = [(created_at, task_id, gpu_type, priority, partial(_single_task, pending, task_id))
            for created_at, task_id, gpu_type, priority in singles]
    gang_ids = dict(_gangs().filter(pending=F("world_size"), created_at__lte=waited).exclude(gpu_type__in=exclude)
                    .annotate(cards=Sum("members__gpu_required", filter=Q(members__status=lifecycle.PENDING)))
                    .filter(cards__gte=MIN_CARDS).values_list("id", "created_at"))
    if gang_ids:
        members: dict[int, list[TaskInfo]] = {}
        for row in (pending.filter(group_id__in=gang_ids).order_by("rank", "id")
                    .values_list(*TASK_INFO_FIELDS)):
            task = task_info_from_row(row)
            members.setdefault(task.group_id, []).append(task)
        jobs += [(gang_ids[group_id], min(task.id for task in tasks), tasks[0].gpu_type,
                  max(task.priority for task in tasks), partial(list, tasks)) for group_id, tasks in members.items()]
    return [(gpu_type, top, read) for _, _, gpu_type, top, read in sorted(jobs, key=lambda job: (job[0], job[1]))]


def _single_task(pending, task_id: int) -> list[TaskInfo]:
    """The task as a one-task job, or none when it left the queue since it was listed."""
    row = pending.filter(id=task_id).values_list(*TASK_INFO_FIELDS).first()
    return [task_info_from_row(row)] if row is not None else []


def _nominate(members: list[TaskInfo], order: Sequence[NodeInfo], could_hold: HoldCheck, *,
              reserved_at: datetime | None = None) -> bool:
    """Nominate each of the job's tasks on its node (`closest_nodes`; `order`: the snapshot's nodes as
    `most_free_first` gives them), all or none."""
    nodes = closest_nodes(members, order, could_hold)
    if nodes is None:
        return False
    try:
        with transaction.atomic():
            for task, node in zip(members, nodes):
                changes = {"nominated_node_id": node.id}
                if reserved_at is not None:
                    changes["reserved_at"] = reserved_at
                if not Task.objects.filter(id=task.id, status=lifecycle.PENDING).update(**changes):
                    raise _Lost
    except _Lost:
        return False
    return True


def closest_nodes(members: list[TaskInfo], order: Sequence[NodeInfo], could_hold: HoldCheck) -> list[NodeInfo] | None:
    """Each task's node (`closest_node` over `order`, the nodes as `most_free_first` gives them), in order, counting
    the cards of the earlier ones as taken there: a gang's members may share a node only as far as its cards go.
    None when one has no node."""
    taken: dict[int, int] = {}
    nodes = []
    for task in members:
        node = closest_node(task, could_hold, order=order, taken=taken)
        if node is None:
            return None
        taken[node.id] = taken.get(node.id, 0) + task.gpu_required
        nodes.append(node)
    return nodes


def closer_node(task: TaskInfo, node_id: int, snapshot: ClusterSnapshot, could_hold: HoldCheck, *,
                order: Sequence[NodeInfo] | None = None) -> NodeInfo | None:
    """The node closest to fitting the task (`closest_node`) when it has strictly more free cards for it than the
    node `node_id` it holds (counted before this cycle's holds), else None. `order`: the snapshot's nodes as
    `most_free_first` gave them, when already sorted."""
    best = closest_node(task, could_hold, order=order if order is not None else most_free_first(snapshot))
    held = snapshot.node(node_id)
    if best is None or held is None or best.id == held.id:
        return None
    return best if free_cards_for(task, best) > free_cards_for(task, held) else None


def free_cards_for(task: TaskInfo, node: NodeInfo, *, taken: int = 0) -> int:
    """The most free cards in one of the node's card groups that can hold the task (after `taken` of them); -1
    when none can."""
    groups = [cards for _, cards in card_groups(task, node) if len(cards) >= taken + task.gpu_required]
    if not groups:
        return -1
    return max(0, max(sum(card.is_free for card in cards) for cards in groups) - taken)


def most_free_first(snapshot: ClusterSnapshot) -> list[NodeInfo]:
    """The snapshot's nodes in the order `closest_node` reads them: most free cards first, lowest id first among
    equals."""
    return sorted(snapshot.nodes, key=lambda node: (-node.free_gpus, node.id))


def closest_node(task: TaskInfo, could_hold: HoldCheck, *, order: Sequence[NodeInfo],
                 taken: Mapping[int, int] = {}) -> NodeInfo | None:
    """Of the nodes that could hold the task once emptied (`could_hold`), the one with the most free cards in one of its card groups (the fewest
    cards still to free), then the lowest id; `order`: the nodes as `most_free_first` gives them (sorted once by
    the caller for all its searches); `taken`: cards by node id already counted for other tasks of its job.
    A card group has at most its node's free cards (the ledger), so the nodes are read most free first, lowest id
    first among equals, and the search ends at the first node that cannot beat the best found — fewer free cards,
    or as many and a higher id, as every node after it: on a large cluster only a few nodes are looked at closely
    (on an idle 5,000-node cluster, two)."""
    best, best_free = None, -1
    for node in order:
        if node.free_gpus < best_free or node.free_gpus == best_free and node.id > best.id:
            break
        if not could_hold(task, node):
            continue
        free = free_cards_for(task, node, taken=taken.get(node.id, 0))
        if free < 0:
            continue
        if free > best_free or free == best_free and node.id < best.id:
            best, best_free = node, free
    return best
