"""Defragmentation's moves (design §16.3), the service the `defrag` plugin acts through: find the movable tasks,
keep the hourly budget, plan (`plugins.defrag.planner`, pure) and carry the plan out on the §9 arc.

A move is a preemption whatever the moved task's priority (it is placed again at once): CAS `running → preempting`
with the target written as the task's `nominated_node` in the same transaction, so the target's cards are held for
it while it stops and until its next attempt (`queue.nomination`); the reserved job is nominated on the node the
moves empty. The budget counts the evictions whose timeline reason says they were moves, over the last hour.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from scheduling import lifecycle
from scheduling.framework.framework import Framework
from scheduling.framework.occupancy import Occupant
from scheduling.framework.reasons import PREEMPTION_PENDING
from scheduling.framework.result import ScheduleResult
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, TaskInfo
from scheduling.groups.budget import budget_permits
from scheduling.models import Task, TaskEvent, TaskType
from scheduling.preemption.defrag_planner import DefragPlan, Move, Mover, plan_defrag
from scheduling.preemption.execute import PreemptionOutcome, note_on_victim
from scheduling.services.task_transition import task_transition
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, task_info_from_row

# The timeline reason of every move starts so; the budget counts them.
MOVE_REASON = "moved by defragmentation"
BUDGET_WINDOW = timedelta(hours=1)
NO_BUDGET = "the defrag budget of {per_hour} moves per hour is spent"
NO_PLAN = "no set of at most {max_moves} moves of preemptible batch tasks would free its cards"


@dataclass(frozen=True)
class DefragDecision:
    """What defrag would do for a reserved job now: the plan, or why nothing is moved."""

    plan: DefragPlan | None
    why_not: str = ""
    budget_left: int = 0
    # Moves made for it earlier that are still stopping.
    stopping: tuple[int, ...] = ()


def moves_in_last_hour() -> int:
    return TaskEvent.objects.filter(to_status=lifecycle.PREEMPTING, reason__startswith=MOVE_REASON,
                                    at__gte=timezone.now() - BUDGET_WINDOW).count()


def movers_near(job: TaskInfo) -> list[Mover]:
    """The running, preemptible batch tasks on cards of the job's GPU type: what defrag may move (training and
    inference never are, design §9)."""
    rows = (Task.objects.filter(status=lifecycle.RUNNING, preemptible=True, type=TaskType.BATCH,
                                node__isnull=False)
            .exclude(gpus=[], shard__isnull=True))
    if job.gpu_type:
        # A row without its card type holds cards of its node's type (the planner matches the cards).
        rows = rows.filter(Q(card_type=job.gpu_type) | Q(card_type=""))
    movers = []
    for node_id, gpus, shard, card_type, *fields in rows.values_list("node_id", "gpus", "shard", "card_type",
                                                                     *TASK_INFO_FIELDS):
        task = task_info_from_row(tuple(fields))
        movers.append(Mover(task, node_id, Occupant.of_row(
            tenant_id=task.tenant_id, task_type=task.type, gpus=gpus, shard=shard, gpu_memory_mb=task.gpu_memory_mb,
            card_type=card_type, gpu_required=task.gpu_required, cpu_cores=task.cpu_cores, memory_mb=task.memory_mb)))
    return movers


def stopping_for(job_id: int) -> tuple[int, ...]:
    return tuple(Task.objects.filter(status=lifecycle.PREEMPTING, reason__startswith=MOVE_REASON,
                                     attempt__extra__preempted_by=job_id).values_list("id", flat=True))


def defrag_decision(job: TaskInfo, snapshot: ClusterSnapshot, framework: Framework, *, max_moves: int,
                    moves_per_hour: int) -> DefragDecision:
    """What defrag does for `job` (a reserved job no node takes) now; acting or not, this is the decision."""
    stopping = stopping_for(job.id)
    if stopping:
        return DefragDecision(None, "moves made for it are still stopping", stopping=stopping)
    left = max(moves_per_hour - moves_in_last_hour(), 0)
    if not left:
        return DefragDecision(None, NO_BUDGET.format(per_hour=moves_per_hour))
    plan = plan_defrag(job, snapshot, movers_near(job), framework, max_moves=min(max_moves, left))
    if plan is None:
        return DefragDecision(None, NO_PLAN.format(max_moves=min(max_moves, left)), budget_left=left)
    return DefragDecision(plan, budget_left=left)


def carry_out(plan: DefragPlan) -> PreemptionOutcome:
    """Preempt each mover with its target as its nomination, and nominate the job on the emptied node."""
    won, lost = [], []
    for move in plan.moves:
        reason = f"{MOVE_REASON} to {move.to_node.name} to make room on {move.from_node.name} for a reserved job"
        with transaction.atomic():
            if budget_permits(task_id=move.task.id, action="defragmentation") and task_transition(
                    move.task.id, lifecycle.RUNNING, lifecycle.PREEMPTING, reason=reason,
                    nominated_node_id=move.to_node.id):
                note_on_victim(move.task.id, preemptor_id=plan.job.id, reason=reason)
                won.append(move)
            else:
                lost.append(move)
    Task.objects.filter(id=plan.job.id, status=lifecycle.PENDING).update(nominated_node_id=plan.node.id)
    message = f"Defragmentation: moving {_count(won)} off {plan.node.name}"
    message += f" ({_describe(won, plan.job.tenant_id)})" if won else ""
    if lost:
        message += f"; {_count(lost)} changed state meanwhile"
    return PreemptionOutcome(code=PREEMPTION_PENDING, message=message + "; it binds once they have stopped.",
                             node_name=plan.node.name, node_id=plan.node.id,
                             victims=tuple(move.task.id for move in won), lost=tuple(move.task.id for move in lost))


def _describe(moves: tuple[Move, ...] | list[Move], tenant_id: int) -> str:
    """What the job's tenant reads (design §15.6, as the preemption plan shows victims): its own moves by id and
    target, other tenants' only counted, and no node named that is dedicated to another tenant."""
    parts = [f"task {move.task.id} to {_node_name(move.to_node, tenant_id)}" for move in moves
             if move.task.tenant_id == tenant_id]
    others = sum(1 for move in moves if move.task.tenant_id != tenant_id)
    if others:
        parts.append(f"{others} {'task' if others == 1 else 'tasks'} of other tenants")
    return ", ".join(parts)


def _node_name(node: NodeInfo, tenant_id: int) -> str:
    return node.name if node.dedicated_tenant_id in (None, tenant_id) else "a node of another tenant"


def _count(moves) -> str:
    return f"{len(moves)} task{'s' if len(moves) != 1 else ''}"


def not_moving(result: ScheduleResult, decision: DefragDecision) -> PreemptionOutcome:
    """The attempt's outcome when defrag moves nothing: the failure's code, and why."""
    if decision.stopping:
        return PreemptionOutcome(code=PREEMPTION_PENDING, message=f"{result.message} Defragmentation: waiting for "
                                 f"{_count(decision.stopping)} moved off its node to stop.",
                                 victims=decision.stopping)
    return PreemptionOutcome(code=result.code, message=f"{result.message} Defragmentation: {decision.why_not}.")
