"""Disruption budgets of inference groups (design §17.2): `min_available` ready replicas that drain, defrag,
reclaim and a rolling update never go below. Each of them asks `budget_permits` before stopping a replica, inside
the transaction that stops it, with the group's members and row locked (the order every member transition takes
them in), so two drains of two nodes cannot each take the last spare replica. A refusal waits: the caller tries
again on its next tick, and the group's timeline says `BudgetHeld` with the figures, once per distinct hold."""

from scheduling import lifecycle
from scheduling.groups.scale import locked_group
from scheduling.groups.timeline import note
from scheduling.models import GroupEvent, Task, TaskGroup, TaskType

BUDGET_HELD = GroupEvent.Kind.BUDGET_HELD


def replica_ready(group: TaskGroup, task: Task) -> bool:
    """Available (design §17.2): running, and ready by its probe when the group declares one."""
    return task.status == lifecycle.RUNNING and (group.readiness is None or task.ready)


def ready_replicas(group: TaskGroup) -> int:
    members = group.members.filter(status=lifecycle.RUNNING)
    if group.readiness is not None:
        members = members.filter(ready=True)
    return members.count()


def budget_permits(*, task_id: int, action: str) -> bool:
    """Whether the replica `task_id` may be stopped by `action` (a drain, a defrag move, a reclaim) without its
    group falling below `min_available` ready replicas. Locks the group; call it inside the stopping transaction.
    A task of no budgeted group, or one that is not ready (it serves nothing), may always stop."""
    group_id = Task.objects.filter(id=task_id, group__type=TaskType.INFERENCE,
                                   group__min_available__isnull=False).values_list("group_id", flat=True).first()
    if group_id is None:
        return True
    group = locked_group(group_id)
    task = Task.objects.get(id=task_id)
    if not replica_ready(group, task):
        return True
    ready = ready_replicas(group)
    if ready - 1 >= group.min_available:
        return True
    budget_held(group, f"{action} waits: stopping replica {task.name} would leave {ready - 1} ready, below "
                       f"min_available {group.min_available}",
                figures={"ready": ready, "min_available": group.min_available, "task": task_id})
    return False


def budget_held(group: TaskGroup, message: str, *, figures: dict) -> None:
    """Put the hold on the group's timeline unless the latest entry already says the same."""
    note(group, BUDGET_HELD, f"{BUDGET_HELD}: {message}", figures=figures, once=True)
