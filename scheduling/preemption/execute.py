"""Carrying out a preemption plan (design §9): mark the victims `preempting`; nothing is released here.

The victims keep holding their cards until the agent confirms the stop (or the watchdog gives up waiting), so no
other task can take the room meanwhile; the preemptor binds in a later cycle against the real ledgers.
"""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import transaction

from scheduling import lifecycle
from scheduling.framework.reasons import PREEMPTION_PENDING
from scheduling.framework.snapshot import TaskInfo
from scheduling.groups.budget import budget_permits
from scheduling.models import SchedulingAttempt
from scheduling.preemption.candidates import ActiveTask
from scheduling.preemption.planner import PreemptionPlan
from scheduling.services.task_transition import task_transition

# The nodes whose own reason an attempt keeps when no preemption could help; the rest are counted by reason.
NODE_REASONS_KEPT = 20


@dataclass(frozen=True)
class PreemptionOutcome:
    """What a preemption attempt achieved for its preemptor; `victims` are the tasks now `preempting` for it."""

    code: str
    message: str
    node_name: str | None = None
    node_id: int | None = None
    victims: tuple[int, ...] = ()
    lost: tuple[int, ...] = ()
    # Node name → why evicting could not make room there; set when no node could be freed (kept in memory whole).
    node_reasons: dict[str, str] = field(default_factory=dict)

    @property
    def preempting(self) -> bool:
        return bool(self.victims)

    @property
    def diagnostics(self) -> dict:
        """What the attempt stores: each node's reason for at most NODE_REASONS_KEPT nodes (one entry per cluster
        node would bloat every attempt's write) and how many nodes gave each reason. Tenants see the counts only
        (`scheduling.diagnostics.visibility`): names of nodes dedicated to others are not theirs to read."""
        preemption = {"node": self.node_name, "victims": list(self.victims), "lost": list(self.lost)}
        if self.node_reasons:
            preemption["node_reasons"] = dict(sorted(self.node_reasons.items())[:NODE_REASONS_KEPT])
            preemption["node_reason_counts"] = dict(Counter(self.node_reasons.values()))
        return {"preemption": preemption}


def execute_plan(plan: PreemptionPlan, preemptor: TaskInfo) -> PreemptionOutcome:
    """CAS each planned victim into `preempting` and note on it who evicted it and why.

    A victim whose CAS loses (it finished, was stopped, or another preemptor took it) is left alone and the outcome
    names only the victims this call won.
    """
    won: list[ActiveTask] = []
    lost: list[ActiveTask] = []
    for victim in plan.victims:
        reason = eviction_reason(victim, preemptor=preemptor, node_name=plan.node_name)
        with transaction.atomic():
            if budget_permits(task_id=victim.id, action="preemption") and task_transition(
                    victim.id, victim.status, lifecycle.PREEMPTING, reason=reason):
                note_on_victim(victim.id, preemptor_id=preemptor.id, reason=reason)
                won.append(victim)
            else:
                lost.append(victim)
    return PreemptionOutcome(
        code=PREEMPTION_PENDING,
        message=pending_message(node_name=plan.node_name, victims=won, lost=lost, tenant_id=preemptor.tenant_id),
        node_name=plan.node_name,
        node_id=plan.node_id,
        victims=tuple(victim.id for victim in won),
        lost=tuple(victim.id for victim in lost),
    )


def eviction_reason(victim: ActiveTask, *, preemptor: TaskInfo, node_name: str) -> str:
    """What the victim's tenant reads: the preemptor by id and priority only when it is the same tenant's task."""
    if victim.tenant_id == preemptor.tenant_id:
        return f"preempted by task {preemptor.id} (priority {preemptor.priority}) to make room on {node_name}"
    return f"preempted by a higher-priority task of another tenant to make room on {node_name}"


def pending_message(*, node_name: str, victims: Sequence[ActiveTask], lost: Sequence[ActiveTask] = (),
                    tenant_id: int) -> str:
    """What the preemptor's tenant reads: its own victims by id and priority, other tenants' only counted."""
    if not victims:
        return f"Preemption on {node_name} found its victims gone meanwhile: {_describe(lost, tenant_id)}."
    message = f"Preempting on {node_name}: {_describe(victims, tenant_id)}; binds once they have stopped."
    if lost:
        message += f" Changed state meanwhile: {_describe(lost, tenant_id)}."
    return message


def _describe(tasks: Sequence[ActiveTask], tenant_id: int) -> str:
    parts = [f"task {task.id} (priority {task.priority})" for task in tasks if task.tenant_id == tenant_id]
    others = sum(1 for task in tasks if task.tenant_id != tenant_id)
    if others:
        parts.append(f"{others} {'task' if others == 1 else 'tasks'} of other tenants")
    return ", ".join(parts)


def note_on_victim(victim_id: int, *, preemptor_id: int, reason: str) -> None:
    """The victim's diagnostics say who evicted it and why; its last attempt's code stays as it was."""
    attempt, _ = SchedulingAttempt.objects.select_for_update().get_or_create(task_id=victim_id)
    attempt.message = reason
    attempt.extra = {**attempt.extra, "preempted_by": preemptor_id, "reason": reason}
    attempt.save(update_fields=["message", "extra", "at"])
