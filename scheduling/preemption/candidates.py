"""The placed, active tasks that preemption may weigh as victims (design §9): read once per cycle for all of its
attempts (`CandidatePool`)."""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from django.db.models import Q

from scheduling import lifecycle
from scheduling.framework.occupancy import Occupant
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task, TaskType

# The victim rule's task types, defined once: training and inference are never evicted (design §9).
NEVER_VICTIM_TYPES = frozenset({TaskType.TRAINING.value, TaskType.INFERENCE.value})


@dataclass(frozen=True)
class ActiveTask:
    id: int
    node_id: int
    tenant_id: int
    type: str
    priority: int
    preemptible: bool
    status: str
    created_at: datetime
    gpu_required: int
    gpus: tuple[int, ...]
    gpu_memory_mb: int
    # The card a fractional task's shard sits on and the card memory the shard holds.
    shard_card: int | None
    shard_memory_mb: int
    cpu_cores: float
    memory_mb: int
    # The preemptor this task was last evicted for, as its diagnostics record it.
    preempted_by: int | None = None
    # The type of its cards (indexes are numbered per vendor on a mixed node, design §15.3).
    card_type: str = ""
    # Admitted by borrowing its cohort's quota: a reclaim may evict it (design §16.2).
    borrowed: bool = False

    @property
    def is_shard(self) -> bool:
        return self.shard_card is not None

    @property
    def occupant(self) -> Occupant:
        shard = {"card": self.shard_card, "memory_limit_mb": self.shard_memory_mb} if self.is_shard else None
        return Occupant.of_row(tenant_id=self.tenant_id, task_type=self.type, gpus=list(self.gpus), shard=shard,
                               gpu_memory_mb=self.gpu_memory_mb, card_type=self.card_type,
                               gpu_required=self.gpu_required, cpu_cores=self.cpu_cores, memory_mb=self.memory_mb)

    @property
    def cards(self) -> tuple[int, ...]:
        return self.occupant.cards


_FIELDS = (
    "id", "node_id", "tenant_id", "type", "priority", "preemptible", "status", "created_at", "gpu_required", "gpus",
    "gpu_memory_mb", "shard", "cpu_cores", "memory_mb", "attempt__extra__preempted_by", "card_type", "borrowed",
)


class CandidatePool:
    """Every active task on the nodes where preemption could act — those holding a task that some preemption may
    evict or a victim still stopping — read on the first preemption attempt of a cycle and then kept in step with
    the cycle's own binds (`record_bind`) and evictions (`record_preempting`), so later attempts of the cycle see
    what a fresh read would, without a query each. Work placed or stopped by others meanwhile is judged at the next
    cycle, exactly as the snapshot's view of the nodes is. Preemptible work is opt-in, so on many clusters most
    nodes (often all) hold nothing to evict and are never read."""

    def __init__(self) -> None:
        self._on_node: dict[int, dict[int, ActiveTask]] | None = None
        # Per victim-state set, per node: the lowest priority among the tasks there that such a preemption may
        # evict (absent: none), so an attempt finds its nodes without looking at every task.
        self._floors: dict[frozenset[str], dict[int, int]] = {}
        # Preemptor id → nodes where victims evicted for it are still stopping.
        self._stopping_for: dict[int, set[int]] = defaultdict(set)

    def candidates(self, *, preemptor_id: int, priority: int, victim_states: Iterable[str]) -> list[ActiveTask]:
        """Every active task on the nodes where a preemption for this task could act: those holding a task it might
        evict (a coarse form of the planner's rules, which stay the judge) or a victim already evicted for it. All
        their tasks, not only the victims, because a card's remaining occupants decide whether the preemptor may
        share it."""
        on_node = self._tasks_by_node()
        floors = self._floors_for(frozenset(victim_states))
        nodes = {node_id for node_id, floor in floors.items() if floor < priority}
        nodes.update(self._stopping_for.get(preemptor_id, ()))
        return [task for node_id in nodes for task in on_node.get(node_id, {}).values()]

    def reclaim_candidates(self, *, preemptor_id: int, lender_ids: frozenset[int]) -> list[ActiveTask]:
        """Every active task on the nodes where a reclaim for this task could act: those holding work borrowed by
        `lender_ids` (the other tenants of its cohort), or a victim already evicted for it (design §16.2)."""
        on_node = self._tasks_by_node()
        nodes = {node_id for node_id, tasks in on_node.items()
                 if any(task.borrowed and task.tenant_id in lender_ids for task in tasks.values())}
        nodes.update(self._stopping_for.get(preemptor_id, ()))
        return [task for node_id in nodes for task in on_node.get(node_id, {}).values()]

    def record_bind(self, task, *, node_id: int, cards, shard: dict | None, card_type: str = "") -> None:
        if self._on_node is None:
            return
        placed = _active_task(task.id, node_id, task.tenant_id, task.type, task.priority, task.preemptible,
                              lifecycle.SCHEDULED, task.created_at, task.gpu_required, list(cards),
                              task.gpu_memory_mb, shard, task.cpu_cores, task.memory_mb, None, card_type)
        if node_id not in self._on_node:
            if not _may_be_evicted(placed):
                return
            # The node held nothing to evict when the pool was read: its occupants now matter (card sharing).
            self._read(Task.objects.filter(node_id=node_id))
        self._on_node.setdefault(node_id, {})[task.id] = placed
        self._refresh_floors(node_id)

    def record_preempting(self, victim_ids: Iterable[int], *, preemptor_id: int) -> None:
        if self._on_node is None:
            return
        victim_ids = set(victim_ids)
        for node_id, tasks in self._on_node.items():
            if victim_ids & tasks.keys():
                for victim_id in victim_ids & tasks.keys():
                    tasks[victim_id] = replace(tasks[victim_id], status=lifecycle.PREEMPTING,
                                               preempted_by=preemptor_id)
                self._stopping_for[preemptor_id].add(node_id)
                self._refresh_floors(node_id)

    def _tasks_by_node(self) -> dict[int, dict[int, ActiveTask]]:
        if self._on_node is None:
            self._on_node = {}
            # Two statements, not a semi-join: the nodes first (none, on most clusters, and then no second read),
            # then their tasks by a list of ids, whose size the planner knows.
            acting = set(Task.objects.filter(status__in=ACTIVE_STATES, node__isnull=False).filter(
                Q(status=lifecycle.PREEMPTING) | Q(preemptible=True) & ~Q(type__in=NEVER_VICTIM_TYPES)
            ).values_list("node_id", flat=True).distinct())
            if acting:
                self._read(Task.objects.filter(node_id__in=sorted(acting)))
        return self._on_node

    def _read(self, tasks) -> None:
        for row in tasks.filter(status__in=ACTIVE_STATES, node__isnull=False).values_list(*_FIELDS):
            task = _active_task(*row)
            self._on_node.setdefault(task.node_id, {})[task.id] = task
            if task.status == lifecycle.PREEMPTING and task.preempted_by is not None:
                self._stopping_for[task.preempted_by].add(task.node_id)

    def _floors_for(self, victim_states: frozenset[str]) -> dict[int, int]:
        if victim_states not in self._floors:
            self._floors[victim_states] = {}
            for node_id in self._tasks_by_node():
                self._refresh_floor(victim_states, node_id)
        return self._floors[victim_states]

    def _refresh_floors(self, node_id: int) -> None:
        for victim_states in self._floors:
            self._refresh_floor(victim_states, node_id)

    def _refresh_floor(self, victim_states: frozenset[str], node_id: int) -> None:
        floor = min((task.priority for task in self._on_node[node_id].values() if _evictable(task, victim_states)),
                    default=None)
        floors = self._floors[victim_states]
        if floor is None:
            floors.pop(node_id, None)
        else:
            floors[node_id] = floor


def _evictable(task: ActiveTask, victim_states: frozenset[str]) -> bool:
    """The coarse victim rule, less the priority comparison."""
    return task.status in victim_states and _may_be_evicted(task)


def _may_be_evicted(task: ActiveTask) -> bool:
    """The coarse victim rule for some preempt_stage: the nodes the pool reads hold such a task."""
    return task.preemptible and task.type not in NEVER_VICTIM_TYPES


def _active_task(id, node_id, tenant_id, type, priority, preemptible, status, created_at, gpu_required, gpus,
                 gpu_memory_mb, shard, cpu_cores, memory_mb, preempted_by, card_type="",
                 borrowed=False) -> ActiveTask:
    shard = shard or {}
    shard_card = shard.get("card")
    return ActiveTask(
        id=id,
        node_id=node_id,
        tenant_id=tenant_id,
        type=type,
        priority=priority,
        preemptible=preemptible,
        status=status,
        created_at=created_at,
        gpu_required=gpu_required,
        gpus=tuple(gpus or ()),
        gpu_memory_mb=gpu_memory_mb,
        shard_card=shard_card,
        shard_memory_mb=int(shard.get("memory_limit_mb") or gpu_memory_mb) if shard_card is not None else 0,
        cpu_cores=cpu_cores,
        memory_mb=memory_mb,
        preempted_by=int(preempted_by) if preempted_by is not None else None,
        card_type=card_type or "",
        borrowed=borrowed,
    )
