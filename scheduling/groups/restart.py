"""Gangs after a member is lost (design §15.5): never left half running.

A training gang whose member failed (`NodeLost`, an error) or went back to the queue while others run has its
remaining members stopped and is placed again whole, as a new run of `world_size` pending members, at most
`max_restarts` times; then the group fails. A member that timed out or was stopped takes the rest down with it
and nothing restarts. A member back in the queue while the others were only scheduled (nothing ran yet) sends
them back too: the gang just waits for its next placement, no restart counted.

`reconcile_gang` is called after every commit that moved a gang member to `failed`, `pending` or `stopped`
(`task_transition`), and the backlog loop sweeps with `reconcile_gangs` for anything a crash left behind. Both
are idempotent: an advisory lock per group serialises them, and the decision is re-read under the members' locks.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import F, Q

from scheduling import lifecycle
from scheduling.groups.status import is_timeout, refresh_group_status, restart_refusal
from scheduling.models import Task, TaskGroup, TaskType
from scheduling.services.task_create import task_create
from scheduling.services.task_transition import task_transition

logger = logging.getLogger(__name__)

# pg_advisory_xact_lock(classid, objid): this class id keeps the gang locks apart from other advisory locks.
_GANG_LOCK_CLASS = 155
_STOP_ARC = {
    lifecycle.PENDING: lifecycle.STOPPED,
    lifecycle.SCHEDULED: lifecycle.STOPPING,
    lifecycle.RUNNING: lifecycle.STOPPING,
}

NOTHING = "nothing"
REQUEUED = "requeued"
RESTARTED = "restarted"
FAILED = "failed"
STOPPED = "stopped"
DEFERRED = "deferred"


# Inside `reconciles_deferred`, the groups whose reconcile was asked for, to run when the block ends.
_deferred: ContextVar[set[int] | None] = ContextVar("deferred_gang_reconciles", default=None)


@contextmanager
def reconciles_deferred() -> Iterator[None]:
    """Hold every gang reconcile asked for in the block and run each once at its end: a sweep that fails all of a
    node's tasks lets each member on that node fail for its own reason before the rest of its gang is stopped."""
    groups: set[int] = set()
    token = _deferred.set(groups)
    try:
        yield
    finally:
        _deferred.reset(token)
        for group_id in sorted(groups):
            reconcile_gang(group_id)


@dataclass(frozen=True)
class _Member:
    id: int
    rank: int | None
    status: str
    reason: str


def reconcile_gang(group_id: int) -> str:
    """Bring a gang whose run lost a member back to a whole state; returns what it did (NOTHING, REQUEUED,
    RESTARTED, FAILED or STOPPED), or DEFERRED inside `reconciles_deferred`."""
    deferred = _deferred.get()
    if deferred is not None:
        deferred.add(group_id)
        return DEFERRED
    group = _gang(group_id)
    if group is None or _decide(group, _current_members(group)) is None:
        return NOTHING
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_GANG_LOCK_CLASS, group_id])
        # Members before the group row, as every transition takes them (see scheduling.groups.status).
        list(Task.objects.select_for_update().filter(group_id=group_id)
             .exclude(status__in=lifecycle.TERMINAL_STATES).order_by("id").values_list("id", flat=True))
        group = _gang(group_id)
        members = _current_members(group)
        decision = _decide(group, members)
        if decision is None:
            return NOTHING
        outcome, cause = decision
        if outcome == REQUEUED:
            for member in members:
                task_transition(member.id, lifecycle.SCHEDULED, lifecycle.PENDING, derive_group_status=False,
                                reason=f"gang {group.name}: {cause}; waiting to be placed whole")
        else:
            _stop_the_rest(group, members, cause)
            if outcome == RESTARTED:
                _start_new_run(group, cause)
            else:
                code = "GangFailed" if outcome == FAILED else "GangStopped"
                TaskGroup.objects.filter(id=group_id).update(diagnostics={
                    "code": code, "member": None, "reason": cause,
                    "message": f"gang {group.name}: {cause}; the rest of the gang is stopped"})
        refresh_group_status(group_id)
    logger.warning("gang %s (group %s): %s — %s", group.name, group_id, cause, outcome)
    return outcome


def reconcile_gangs() -> int:
    """Reconcile every training gang that may not be whole (a member still holds or waits for cards, or its run
    is restarting); returns how many changed."""
    live = lifecycle.ACTIVE_STATES | {lifecycle.PENDING}
    candidates = (TaskGroup.objects.filter(type=TaskType.TRAINING, world_size__gt=1)
                  .filter(Q(members__status__in=live) | Q(status=TaskGroup.Status.RESTARTING))
                  .distinct().order_by("id").values_list("id", flat=True))
    changed = 0
    for group_id in candidates:
        # One gang's failure must not keep the others from being reconciled, minute after minute.
        try:
            with transaction.atomic():
                changed += reconcile_gang(group_id) != NOTHING
        except Exception:
            logger.exception("could not reconcile gang group %s; the others go on", group_id)
    return changed


def _gang(group_id: int) -> TaskGroup | None:
    return (TaskGroup.objects.select_related("tenant")
            .filter(id=group_id, type=TaskType.TRAINING, world_size__gt=1).first())


def _current_members(group: TaskGroup) -> list[_Member]:
    rows = (Task.objects.filter(group_id=group.id, group_run=group.restarts).order_by("rank", "id")
            .values_list("id", "rank", "status", "reason"))
    return [_Member(*row) for row in rows]


def _decide(group: TaskGroup, members: list[_Member]) -> tuple[str, str] | None:
    """(what to do, why) for a run that is not whole, None for one that is (or is over)."""
    live = [member for member in members if member.status not in lifecycle.TERMINAL_STATES]
    stoppable = any(member.status in _STOP_ARC for member in live)
    failed = next((member for member in members if member.status == lifecycle.FAILED), None)
    if failed is not None:
        cause = f"rank {failed.rank} (task {failed.id}) failed: {failed.reason or 'no reason given'}"
        return _restart_or_fail(group, cause, timed_out=is_timeout(failed.reason), stoppable=stoppable)
    stopped = next((member for member in members if member.status == lifecycle.STOPPED), None)
    if stopped is not None:
        return (STOPPED, f"rank {stopped.rank} (task {stopped.id}) was stopped") if stoppable else None
    back = next((member for member in live if member.status == lifecycle.PENDING), None)
    if back is None or all(member.status == lifecycle.PENDING for member in live):
        return None
    cause = f"rank {back.rank} (task {back.id}) went back to the queue: {back.reason or 'no reason given'}"
    if all(member.status in (lifecycle.PENDING, lifecycle.SCHEDULED) for member in live):
        return REQUEUED, cause
    return _restart_or_fail(group, cause, timed_out=False, stoppable=stoppable)


def _restart_or_fail(group: TaskGroup, cause: str, *, timed_out: bool, stoppable: bool) -> tuple[str, str] | None:
    refusal = restart_refusal(restarts=group.restarts, max_restarts=group.max_restarts,
                              tenant_active=group.tenant.is_active, timed_out=timed_out)
    if not refusal:
        return RESTARTED, cause
    # Failing for good only has work to do while members still hold cards.
    return (FAILED, f"{cause}; {refusal}") if stoppable else None


def _stop_the_rest(group: TaskGroup, members: list[_Member], cause: str) -> None:
    for member in members:
        target = _STOP_ARC.get(member.status)
        if target is not None:
            task_transition(member.id, member.status, target, reason=f"gang {group.name}: {cause}",
                            derive_group_status=False)


def _start_new_run(group: TaskGroup, cause: str) -> None:
    """The next run: `world_size` pending members, ranks 0…n-1, as the first run was created."""
    run = group.restarts + 1
    TaskGroup.objects.filter(id=group.id).update(
        restarts=F("restarts") + 1,
        diagnostics={"code": "GangRestarted", "member": None, "reason": cause,
                     "message": f"gang {group.name}: {cause}; placed again whole (restart {run} of "
                                f"{group.max_restarts})"},
    )
    first = Task.objects.filter(group_id=group.id, group_run=0).order_by("rank", "id").first()
    for rank in range(group.world_size):
        task_create(
            tenant=group.tenant, name=f"{group.name}-{rank}", type=group.type, image=group.image,
            command=group.command, env=group.env, gpu_type=group.gpu_type, gpu_required=group.gpus_per_worker,
            priority=first.priority if first else 50, labels=first.labels if first else None,
            group=group, rank=rank, group_run=run, tolerations=group.tolerations,
            node_selector=group.node_selector, timeout_seconds=group.timeout_seconds,
            termination_grace_seconds=group.termination_grace_seconds,
        )
