"""Stopping a group for good (design §17.2): every live member stops gracefully through the one stop service, and
nothing is rebuilt, scaled, rolled out or changed by a window afterwards (`TaskGroup.stopped_at`)."""

from django.db import transaction
from django.utils import timezone

from heteroflow_site.errors import Conflict
from scheduling import lifecycle
from scheduling.groups.refusals import GroupStopped
from scheduling.groups.status import refresh_group_status
from scheduling.models import ROLLOUT_STATES, GroupRevision, Task, TaskGroup
from scheduling.services.task_stop import task_stop

STOP_REASON = "group stopped by user"


def task_group_stop(*, group: TaskGroup, reason: str = STOP_REASON) -> TaskGroup:
    """Mark the group stopped (a CAS: a second stop is a 409 `group_stopped`) and stop its live members."""
    with transaction.atomic():
        # Members before the group row: the order every member transition locks in (scheduling.groups.status).
        live = list(Task.objects.select_for_update().filter(group_id=group.id)
                    .exclude(status__in=lifecycle.TERMINAL_STATES).order_by("id"))
        if not TaskGroup.objects.filter(id=group.id, stopped_at__isnull=True).update(stopped_at=timezone.now()):
            raise GroupStopped(f"group {group.name!r} is already stopped", field="status")
        GroupRevision.objects.filter(group_id=group.id, state__in=ROLLOUT_STATES).update(
            state=GroupRevision.State.SUPERSEDED, reason="the group was stopped during its rollout",
            finished_at=timezone.now())
        for member in live:
            try:
                task_stop(task=member, reason=reason)
            except Conflict:
                pass  # it ended on its own meanwhile: nothing left to stop
        refresh_group_status(group.id)
    group.refresh_from_db()
    return group

