"""Disruption budgets of inference groups (design §17.2): `min_available` ready replicas that drain, defrag,
reclaim and a rolling update never go below. Each of them asks `budget_permits` before stopping a replica, inside
the transaction that stops it, with the group's members and row locked (the order every member transition takes
them in), so two drains of two nodes cannot each take the last spare replica. A refusal waits: the caller tries
again on its next tick, and the group's timeline says `BudgetHeld` with the figures, once per distinct hold."""

from scheduling.groups.replica_state import replica_ready
from scheduling.groups.replicas import live_replicas
from scheduling.groups.scale import locked_group
from scheduling.groups.timeline import note
from scheduling.models import GroupEvent, Task, TaskGroup, TaskType

BUDGET_HELD = GroupEvent.Kind.BUDGET_HELD


def budget_permits(*, task_id: int, action: str) -> bool:
    """Whether the replica of task `task_id` may be stopped by `action` (a drain, a defrag move, a reclaim) without
    its group falling below `min_available` ready replicas; stopping one member of a multi-node replica stops the
    whole replica (design §17.1). Locks the group; call it inside the stopping transaction. A task of no budgeted
    group, or of a replica that is not ready (it serves nothing), may always stop."""
    group_id = Task.objects.filter(id=task_id, group__type=TaskType.INFERENCE,
                                   group__min_available__isnull=False).values_list("group_id", flat=True).first()
    if group_id is None:
        return True
    group = locked_group(group_id)
    replicas = live_replicas(group)
    replica = next((replica for replica in replicas if task_id in {member.id for member in replica.members}), None)
    if replica is None or not replica_ready(group, replica):
        return True
    ready = sum(replica_ready(group, live) for live in replicas)
    if ready - 1 >= group.min_available:
        return True
    budget_held(group, f"{action} waits: stopping replica {replica.head.name} would leave {ready - 1} ready, below "
                       f"min_available {group.min_available}",
                figures={"ready": ready, "min_available": group.min_available, "task": task_id})
    return False


def budget_held(group: TaskGroup, message: str, *, figures: dict) -> None:
    """Put the hold on the group's timeline unless the latest entry already says the same."""
    note(group, BUDGET_HELD, f"{BUDGET_HELD}: {message}", figures=figures, once=True)
