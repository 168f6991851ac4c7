"""`TaskGroup.status`, derived from the members of the group's current run (design §15.5).

`refresh_group_status` runs inside the transaction of every change of a member's status (the transition service
and the bind claims), so the stored status is always the one the members imply. It takes the group row's lock
only after the member's: every writer of a group locks members first, so none waits the other way round.
"""

from collections.abc import Iterable

from scheduling import lifecycle
from scheduling.lifecycle import TIMEOUT_REASON
from scheduling.models import Task, TaskGroup, TaskType
from tenants.models import Tenant

Status = TaskGroup.Status


def derive_group_status(*, type: str, world_size: int, restarts: int, max_restarts: int, replicas: int | None,
                        tenant_active: bool, members: Iterable[tuple[str, str]], stopped: bool = False) -> str:
    """The group's status from its current run's members, as (status, reason) pairs."""
    members = list(members)
    statuses = [status for status, _reason in members]
    live = [status for status in statuses if status not in lifecycle.TERMINAL_STATES]
    if type == TaskType.INFERENCE:
        # Replicas come and go: the group is what its best live replica is; none live and none wanted is stopped.
        for status, derived in ((lifecycle.RUNNING, Status.RUNNING), (lifecycle.SCHEDULED, Status.SCHEDULED),
                                (lifecycle.PENDING, Status.PENDING)):
            if status in live:
                return derived
        if live:
            return Status.RUNNING
        # Stopped by its user (design §17.2), or none wanted and none live.
        return Status.STOPPED if stopped or (statuses and not replicas) else Status.PENDING
    if not statuses:
        return Status.PENDING
    failures = [reason for status, reason in members if status == lifecycle.FAILED]
    if failures:
        # A gang's other members are stopped, to run again as a new run or for good (scheduling.groups.restart).
        refusal = restart_refusal(restarts=restarts, max_restarts=max_restarts, tenant_active=tenant_active,
                                  timed_out=any(is_timeout(reason) for reason in failures))
        return Status.RESTARTING if world_size > 1 and not refusal else Status.FAILED
    if not live:
        return Status.SUCCEEDED if all(status == lifecycle.SUCCEEDED for status in statuses) else Status.STOPPED
    # A member fell back to the queue while others hold cards: the gang is being placed again.
    if lifecycle.PENDING in live and len(set(live)) > 1:
        return Status.RESTARTING
    if all(status == lifecycle.PENDING for status in live):
        return Status.RESTARTING if restarts else Status.PENDING
    if lifecycle.SCHEDULED in live:
        return Status.RESTARTING if restarts else Status.SCHEDULED
    return Status.RUNNING


def restart_refusal(*, restarts: int, max_restarts: int, tenant_active: bool, timed_out: bool) -> str:
    """Why a gang that lost a member is not run again ("" when it is)."""
    if timed_out:
        return "a timed-out gang is not run again"
    if restarts >= max_restarts:
        return f"all {max_restarts} restarts used"
    if not tenant_active:
        return "its tenant is inactive"
    return ""


def is_timeout(reason: str) -> bool:
    """A member stopped for running too long: running it again would only time out again, so no restart."""
    return reason == TIMEOUT_REASON


def refresh_group_status(group_id: int) -> str:
    """Store the status the group's current members imply; returns it.

    The group row is locked before the members are read: two members changing at once (two claims) would
    otherwise each derive from a view without the other's change and store a status neither implies. After the
    lock, the read's fresh snapshot includes the change of whoever held it.
    """
    group = (TaskGroup.objects.select_for_update(of=("self",)).filter(id=group_id)
             .values("type", "world_size", "restarts", "max_restarts", "replicas", "tenant__status", "stopped_at")
             .first())
    if group is None:
        return ""
    members = Task.objects.filter(group_id=group_id, group_run=group["restarts"]).values_list("status", "reason")
    tenant_active = group.pop("tenant__status") == Tenant.Status.ACTIVE
    stopped = group.pop("stopped_at") is not None
    derived = derive_group_status(members=members, tenant_active=tenant_active, stopped=stopped, **group)
    TaskGroup.objects.filter(id=group_id).exclude(status=derived).update(status=derived)
    return derived
