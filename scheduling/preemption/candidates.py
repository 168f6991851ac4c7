"""The placed, active tasks that preemption may weigh as victims (SPEC §9), read in one query per attempt."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from scheduling import lifecycle
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task, TaskType


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

    @property
    def is_shard(self) -> bool:
        return self.shard_card is not None

    @property
    def cards(self) -> tuple[int, ...]:
        return (self.shard_card,) if self.is_shard else self.gpus


_FIELDS = (
    "id", "node_id", "tenant_id", "type", "priority", "preemptible", "status", "created_at", "gpu_required", "gpus",
    "gpu_memory_mb", "shard", "cpu_cores", "memory_mb", "attempt__extra__preempted_by",
)


def preemption_candidates(*, preemptor_id: int, priority: int, victim_states: Iterable[str]) -> list[ActiveTask]:
    """Every active task on the nodes where a preemption for this task could act, in one query.

    Those nodes hold a task it might evict (a coarse form of the planner's rules, which stay the judge) or a victim
    already evicted for it. All their tasks are read, not only the victims, because a card's remaining occupants
    decide whether the preemptor may share it. Nodes with nothing to evict cost nothing here.
    """
    evictable = Task.objects.filter(
        status__in=list(victim_states), preemptible=True, priority__lt=priority, type=TaskType.BATCH
    )
    evicted_for_it = Task.objects.filter(status=lifecycle.PREEMPTING, attempt__extra__preempted_by=preemptor_id)
    nodes = (evictable | evicted_for_it).filter(node__isnull=False).values("node_id")
    rows = Task.objects.filter(status__in=ACTIVE_STATES, node_id__in=nodes).values_list(*_FIELDS)
    return [_active_task(*row) for row in rows]


def _active_task(id, node_id, tenant_id, type, priority, preemptible, status, created_at, gpu_required, gpus,
                 gpu_memory_mb, shard, cpu_cores, memory_mb, preempted_by) -> ActiveTask:
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
    )
