"""Scaling an inference group by hand (design §17.2): `PATCH /api/v1/task-groups/{id}` `{replicas}`.

Up creates the missing replicas at once (a multi-node replica whole, design §17.1), each admitted as a submission is (the tenant's pending cap here, its
priority ceiling, then its quota when the scheduler places it); down stops the newest replicas first, each whole. 0 is scaled
to zero, not stopped: a later scale brings it back. A window's action holds the replica count, so a scale then is a
409 naming the window rather than a change the window would undo.
"""

from django.db import transaction

from heteroflow_site.errors import DomainError
from scheduling import lifecycle
from scheduling.fair_share.priority import priority_within_ceiling
from scheduling.groups.refusals import GroupStopped, NotAService, WindowActive
from scheduling.groups.replicas import add_replicas, group_priority, live_replicas, set_desired_replicas
from scheduling.groups.status import refresh_group_status
from scheduling.models import Task, TaskGroup, TaskType
from scheduling.services.task_create import ensure_pending_capacity


def locked_group(group_id: int) -> TaskGroup:
    """The group's row locked, after its live members' (the order every member transition takes them in)."""
    list(Task.objects.select_for_update().filter(group_id=group_id).exclude(status__in=lifecycle.TERMINAL_STATES)
         .order_by("id").values_list("id", flat=True))
    return TaskGroup.objects.select_for_update(of=("self",)).select_related("tenant").get(id=group_id)


def ensure_serving(group: TaskGroup, *, field: str) -> None:
    """The refusals every lifecycle change shares: a training group, a stopped group."""
    if group.type != TaskType.INFERENCE:
        raise NotAService(f"group {group.name!r} is a {group.type} group; only inference groups change after "
                          f"submission", field=field)
    if group.stopped_at is not None:
        raise GroupStopped(f"group {group.name!r} is stopped", field=field)


def window_description(group: TaskGroup) -> str:
    window = group.window or {}
    days = ",".join(str(day) for day in window.get("days", range(7)))
    return (f"its scheduling window ({window.get('start')}–{window.get('end')} {window.get('timezone', 'UTC')}, "
            f"days {days}) holds it at {window.get('action')}")


def task_group_scale(*, group: TaskGroup, replicas: int) -> TaskGroup:
    with transaction.atomic():
        locked = locked_group(group.id)
        ensure_serving(locked, field="replicas")
        if locked.window_applied:
            raise WindowActive(f"group {locked.name!r} cannot be scaled now: {window_description(locked)}",
                               field="replicas")
        bounds = locked.autoscale
        if bounds and not bounds["min"] <= replicas <= bounds["max"]:
            # The autoscaler would undo it within 15 s: refused rather than silently overridden (design §17.2).
            raise DomainError(f"group {locked.name!r} is autoscaled within [{bounds['min']}, {bounds['max']}] "
                              f"replicas", field="replicas")
        live = live_replicas(locked)
        adding = replicas - len(live)
        if adding > 0:
            priority = priority_within_ceiling(tenant=locked.tenant, priority=group_priority(locked))
            ensure_pending_capacity(tenant=locked.tenant, adding=adding * locked.nodes_per_replica)
            add_replicas(locked, adding, live=live, priority=priority)
        else:
            set_desired_replicas(locked, replicas, reason=f"group scaled to {replicas} replica(s)")
        TaskGroup.objects.filter(id=locked.id).update(replicas=replicas)
        refresh_group_status(locked.id)
    group.refresh_from_db()
    return group
