"""Carrying out a preemption plan (SPEC §9): mark the victims `preempting`; nothing is released here.

The victims keep holding their cards until the agent confirms the stop (or the watchdog gives up waiting), so no
other task can take the room meanwhile; the preemptor binds in a later cycle against the real ledgers.
"""

from dataclasses import dataclass

from django.db import transaction

from scheduling import lifecycle
from scheduling.framework.reasons import PREEMPTION_PENDING
from scheduling.framework.snapshot import TaskInfo
from scheduling.models import SchedulingAttempt
from scheduling.preemption.planner import PreemptionPlan
from scheduling.services.task_transition import task_transition


@dataclass(frozen=True)
class PreemptionOutcome:
    """What a preemption attempt achieved for its preemptor; `victims` are the tasks now `preempting` for it."""

    code: str
    message: str
    node_name: str | None = None
    victims: tuple[int, ...] = ()
    lost: tuple[int, ...] = ()

    @property
    def preempting(self) -> bool:
        return bool(self.victims)

    @property
    def diagnostics(self) -> dict:
        return {"preemption": {"node": self.node_name, "victims": list(self.victims), "lost": list(self.lost)}}


def execute_plan(plan: PreemptionPlan, preemptor: TaskInfo) -> PreemptionOutcome:
    """CAS each planned victim into `preempting` and note on it who evicted it and why.

    A victim whose CAS loses (it finished, was stopped, or another preemptor took it) is left alone and the outcome
    names only the victims this call won.
    """
    reason = f"preempted by task {preemptor.id} (priority {preemptor.priority}) to make room on {plan.node_name}"
    won: list[int] = []
    lost: list[int] = []
    for victim in plan.victims:
        with transaction.atomic():
            if task_transition(victim.id, victim.status, lifecycle.PREEMPTING, reason=reason):
                _note_on_victim(victim.id, preemptor_id=preemptor.id, reason=reason)
                won.append(victim.id)
            else:
                lost.append(victim.id)
    return PreemptionOutcome(
        code=PREEMPTION_PENDING,
        message=pending_message(node_name=plan.node_name, victims=won, lost=lost),
        node_name=plan.node_name,
        victims=tuple(won),
        lost=tuple(lost),
    )


def pending_message(*, node_name: str, victims: list[int], lost: list[int] = ()) -> str:
    if not victims:
        return f"preemption on {node_name} found its victims already gone: {_ids(lost)}"
    message = f"waiting for {len(victims)} preempted task(s) to stop on {node_name}: {_ids(victims)}"
    if lost:
        message += f" (changed state meanwhile: {_ids(lost)})"
    return message


def _ids(task_ids) -> str:
    return ", ".join(f"task {task_id}" for task_id in task_ids)


def _note_on_victim(victim_id: int, *, preemptor_id: int, reason: str) -> None:
    """The victim's diagnostics say who evicted it and why; its last attempt's code stays as it was."""
    attempt, _ = SchedulingAttempt.objects.select_for_update().get_or_create(task_id=victim_id)
    attempt.message = reason
    attempt.extra = {**attempt.extra, "preempted_by": preemptor_id, "reason": reason}
    attempt.save(update_fields=["message", "extra", "at"])
