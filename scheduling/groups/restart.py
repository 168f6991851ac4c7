"""Gangs after a member is lost (design §15.5): never left half running.

A training gang whose member failed (`NodeLost`, an error) or went back to the queue while others run has its
remaining members stopped and is placed again whole, as a new run of `world_size` pending members, at most
`max_restarts` times; then the group fails. A member that timed out or was stopped takes the rest down with it
and nothing restarts. A member back in the queue while the others were only scheduled (nothing ran yet) sends
them back too: the gang just waits for its next placement, no restart counted.

A multi-node inference replica (design §17.1) is a gang too, each replica on its own: one that lost a member (it
ended, or went back to the queue while others run) has its other members stopped, and the rebuild loop replaces it
whole once they are gone (`scheduling.groups.replicas`); one whose members were only scheduled goes back to the
queue whole. No restart is counted: a service's replicas are rebuilt for as long as it is wanted.

`reconcile_gang` is called after every commit that moved a gang member to `failed`, `pending` or `stopped`
(`task_transition`), and the backlog loop sweeps with `reconcile_gangs` for anything a crash left behind. Both
are idempotent: an advisory lock per group serialises them, and the decision is re-read under the members' locks.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial

from django.db import connection, transaction
from django.db.models import F, Q

from scheduling import lifecycle
from scheduling.groups.status import is_timeout, refresh_group_status, restart_refusal
from scheduling.groups.timeline import note
from scheduling.lifecycle import REPLICA_MEMBER_LOST_REASON
from scheduling.models import GroupEvent, Task, TaskGroup, TaskType
from scheduling.services.task_create import task_create
from scheduling.services.task_transition import task_transition

logger = logging.getLogger(__name__)

# pg_advisory_xact_lock(classid, objid): this class id keeps the gang locks apart from other advisory locks.
_GANG_LOCK_CLASS = 155
# The groups placed as gangs: training gangs, and services of multi-node replicas (each replica a gang).
_GANGS = (Q(type=TaskType.TRAINING, world_size__gt=1)
          | Q(type=TaskType.INFERENCE, nodes_per_replica__gt=1))
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
REBUILT = "rebuilt"
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
    replica: int | None = None


# A gang's members with what to do about them and why.
_Decision = tuple[list[_Member], str, str]


def reconcile_gang(group_id: int) -> str:
    """Bring a gang whose run lost a member, or the multi-node replicas of a service that did, back to a whole
    state; returns what it did (NOTHING, REQUEUED, RESTARTED, FAILED, STOPPED or REBUILT; of several replicas, the
    first one's), or DEFERRED inside `reconciles_deferred`."""
    deferred = _deferred.get()
    if deferred is not None:
        deferred.add(group_id)
        return DEFERRED
    group = _gang(group_id)
    if group is None or not _decisions(group):
        return NOTHING
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_GANG_LOCK_CLASS, group_id])
        # Members before the group row, as every transition takes them (see scheduling.groups.status).
        list(Task.objects.select_for_update().filter(group_id=group_id)
             .exclude(status__in=lifecycle.TERMINAL_STATES).order_by("id").values_list("id", flat=True))
        group = _gang(group_id)
        decisions = _decisions(group)
        if not decisions:
            return NOTHING
        for members, outcome, cause in decisions:
            _carry_out(group, members, outcome, cause)
        refresh_group_status(group_id)
    for members, outcome, cause in decisions:
        logger.warning("%s (group %s): %s — %s", _gang_name(group, members), group_id, cause, outcome)
    return decisions[0][1]


def _carry_out(group: TaskGroup, members: list[_Member], outcome: str, cause: str) -> None:
    name = _gang_name(group, members)
    if outcome == REQUEUED:
        for member in members:
            task_transition(member.id, lifecycle.SCHEDULED, lifecycle.PENDING, derive_group_status=False,
                            reason=f"{name}: {cause}; waiting to be placed whole")
        return
    if outcome == REBUILT:
        # The stop's reason says the member did nothing wrong (`crash_loop` passes such members over).
        _stop_the_rest(group, members, f"{REPLICA_MEMBER_LOST_REASON}: {name}: {cause}")
        note(group, GroupEvent.Kind.REBUILT, f"{name}: {cause}; its other members are stopped and it is replaced "
                                             f"whole", figures={"replica": members[0].replica})
        return
    _stop_the_rest(group, members, f"{name}: {cause}")
    if outcome == RESTARTED:
        _start_new_run(group, cause)
    else:
        code = "GangFailed" if outcome == FAILED else "GangStopped"
        TaskGroup.objects.filter(id=group.id).update(diagnostics={
            "code": code, "member": None, "reason": cause,
            "message": f"{name}: {cause}; the rest of the gang is stopped"})


def _gang_name(group: TaskGroup, members: list[_Member]) -> str:
    replica = members[0].replica if members else None
    return f"gang {group.name}" if replica is None else f"replica {replica} of {group.name}"


def reconcile_gangs() -> int:
    """Reconcile every gang that may not be whole (a training gang with a member that still holds or waits for
    cards, or whose run is restarting; a service of multi-node replicas with a live member); returns how many
    changed."""
    live = lifecycle.ACTIVE_STATES | {lifecycle.PENDING}
    candidates = (TaskGroup.objects.filter(_GANGS)
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
    return TaskGroup.objects.select_related("tenant").filter(_GANGS, id=group_id).first()


def _decisions(group: TaskGroup) -> list[_Decision]:
    """What to do about each of the group's gangs that is not whole: the current run of a training gang, each
    multi-node replica with a live member of a service."""
    if group.type == TaskType.TRAINING:
        gangs, decide = [_current_members(group)], partial(_decide, group)
    else:
        gangs, decide = _live_replica_members(group), _decide_replica
    return [(members, *decision) for members in gangs if (decision := decide(members)) is not None]


def _current_members(group: TaskGroup) -> list[_Member]:
    rows = (Task.objects.filter(group_id=group.id, group_run=group.restarts).order_by("rank", "id")
            .values_list("id", "rank", "status", "reason"))
    return [_Member(*row) for row in rows]


def _live_replica_members(group: TaskGroup) -> list[list[_Member]]:
    """Every member of each replica that has a live one, by replica and rank."""
    live = (Task.objects.filter(group_id=group.id, replica__isnull=False)
            .exclude(status__in=lifecycle.TERMINAL_STATES).values("replica"))
    rows = (Task.objects.filter(group_id=group.id, replica__in=live).order_by("replica", "rank", "id")
            .values_list("id", "rank", "status", "reason", "replica"))
    replicas: dict[int, list[_Member]] = {}
    for row in rows:
        member = _Member(*row)
        replicas.setdefault(member.replica, []).append(member)
    return list(replicas.values())


def _decide_replica(members: list[_Member]) -> tuple[str, str] | None:
    """(what to do, why) for a multi-node replica that is not whole, None for one that is (or is on its way out)."""
    live = [member for member in members if member.status not in lifecycle.TERMINAL_STATES]
    ended = next((member for member in members if member.status in lifecycle.TERMINAL_STATES), None)
    if ended is not None:
        cause = f"rank {ended.rank} (task {ended.id}) {ended.status}: {ended.reason or 'no reason given'}"
        return (REBUILT, cause) if any(member.status in _STOP_ARC for member in live) else None
    back = _back_in_queue(live)
    if back is None:
        return None
    cause, requeue = back
    return (REQUEUED, cause) if requeue else (REBUILT, cause)


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
    back = _back_in_queue(live)
    if back is None:
        return None
    cause, requeue = back
    if requeue:
        return REQUEUED, cause
    return _restart_or_fail(group, cause, timed_out=False, stoppable=stoppable)


def _back_in_queue(live: list[_Member]) -> tuple[str, bool] | None:
    """When some live members went back to the queue and others did not: why, and whether none has started yet
    (then the whole run simply goes back to the queue)."""
    back = next((member for member in live if member.status == lifecycle.PENDING), None)
    if back is None or all(member.status == lifecycle.PENDING for member in live):
        return None
    cause = f"rank {back.rank} (task {back.id}) went back to the queue: {back.reason or 'no reason given'}"
    return cause, all(member.status in (lifecycle.PENDING, lifecycle.SCHEDULED) for member in live)


def _restart_or_fail(group: TaskGroup, cause: str, *, timed_out: bool, stoppable: bool) -> tuple[str, str] | None:
    refusal = restart_refusal(restarts=group.restarts, max_restarts=group.max_restarts,
                              tenant_active=group.tenant.is_active, timed_out=timed_out)
    if not refusal:
        return RESTARTED, cause
    # Failing for good only has work to do while members still hold cards.
    return (FAILED, f"{cause}; {refusal}") if stoppable else None


def _stop_the_rest(group: TaskGroup, members: list[_Member], reason: str) -> None:
    for member in members:
        target = _STOP_ARC.get(member.status)
        if target is not None:
            task_transition(member.id, member.status, target, reason=reason, derive_group_status=False)


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
