"""Replica counts of inference groups: the desired figure, and the rebuild loop that keeps it."""

import logging

from django.utils import timezone

from heteroflow_site.errors import DomainError, TooManyPending
from scheduling import lifecycle
from scheduling.groups.crash_loop import crash_loop
from scheduling.housekeeping.isolation import isolated
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task, TaskGroup, TaskType
from scheduling.services.task_create import ensure_pending_capacity, task_create
from scheduling.services.task_stop import task_stop

logger = logging.getLogger(__name__)

LIVE_STATES = ACTIVE_STATES | {lifecycle.PENDING}


def live_replicas(group: TaskGroup) -> list[Task]:
    return list(group.members.filter(status__in=LIVE_STATES).order_by("-rank", "-id"))


def set_desired_replicas(group: TaskGroup, desired: int, *, reason: str) -> None:
    """Record the desired count and stop the replicas above it (newest first); growth is the rebuild loop's job."""
    group.replicas = desired
    live = live_replicas(group)
    for replica in live[: max(len(live) - desired, 0)]:
        try:
            task_stop(task=replica, reason=reason)
        except DomainError:
            logger.info("replica %s of group %s already finished", replica.id, group.id)


def rebuild_inference_groups() -> int:
    """Create pending replicas for every inference group with fewer live replicas than desired; return how many."""
    created = 0
    groups = (TaskGroup.objects.select_related("tenant")
              .filter(type=TaskType.INFERENCE, replicas__gt=0, stopped_at__isnull=True).exclude(window_applied="stop"))
    for group in groups:
        if group.tenant.is_active:
            created += isolated(lambda: _rebuild_group(group.id), what=f"rebuild of inference group {group.id}") or 0
    return created


def _rebuild_group(group_id: int) -> int:
    locked = TaskGroup.objects.select_for_update().select_related("tenant").get(id=group_id)
    if locked.stopped_at is not None:
        return 0
    live = live_replicas(locked)
    missing = (locked.replicas or 0) - len(live)
    if missing <= 0:
        return 0
    loop = crash_loop(locked)
    if loop.holds_at(timezone.now()):
        logger.info("group %s: %s missing replicas wait until %s after %s consecutive crashes", group_id, missing,
                    loop.next_replica_at.isoformat(), loop.crashes)
        return 0
    try:
        ensure_pending_capacity(tenant=locked.tenant, adding=missing)
    except TooManyPending as refusal:
        logger.warning("group %s: %s missing replicas not rebuilt: %s", group_id, missing, refusal)
        return 0
    next_rank = (max((task.rank or 0 for task in live), default=-1)) + 1
    for offset in range(missing):
        create_member(locked, rank=next_rank + offset)
    return missing


def create_member(group: TaskGroup, *, rank: int, priority: int | None = None) -> Task:
    return task_create(
        tenant=group.tenant,
        name=f"{group.name}-{rank}",
        type=group.type,
        image=group.image,
        command=group.command,
        env=group.env,
        revision=group.revision,
        model=group.model,
        gpu_type=group.gpu_type,
        gpu_required=group.gpus_per_worker,
        priority=group_priority(group) if priority is None else priority,
        group=group,
        rank=rank,
        tolerations=group.tolerations,
        node_selector=group.node_selector,
        labels=group.labels,
        timeout_seconds=group.timeout_seconds,
        termination_grace_seconds=group.termination_grace_seconds,
    )


def group_priority(group: TaskGroup) -> int:
    first = group.members.order_by("id").values_list("priority", flat=True).first()
    return first if first is not None else 50
