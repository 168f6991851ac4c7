"""Replicas of inference groups: what one is, the desired count, and the rebuild loop that keeps it.

A replica is one task, or with `nodes_per_replica` > 1 that many member tasks sharing a `replica` number, ranked
0…n-1 inside it and placed whole as a gang, one per node (design §17.1). Everything that counts, creates, stops
or judges replicas does it here, replica by replica: a multi-node replica is created whole, stopped whole and
ready only when all its members run (its rank 0, the master that serves, ready by the probe).
"""

import logging

from django.db.models import Max
from django.utils import timezone

from heteroflow_site.errors import DomainError, TooManyPending
from scheduling.groups.crash_loop import crash_loop
from scheduling.groups.replica_state import LIVE_STATES, Replica, as_replicas
from scheduling.housekeeping.isolation import isolated
from scheduling.models import Task, TaskGroup, TaskType
from scheduling.services.task_create import ensure_pending_capacity, task_create
from scheduling.services.task_stop import task_stop

logger = logging.getLogger(__name__)


def live_replicas(group: TaskGroup) -> list[Replica]:
    """The replicas with a live member, newest first."""
    return as_replicas(group.members.filter(status__in=LIVE_STATES))


def stop_replica(replica: Replica, *, reason: str) -> None:
    """Stop every live member: a replica leaves whole."""
    for member in replica.members:
        try:
            task_stop(task=member, reason=reason)
        except DomainError:
            logger.info("member %s of replica %s already finished", member.id, replica.index)


def set_desired_replicas(group: TaskGroup, desired: int, *, reason: str) -> None:
    """Record the desired count and stop the replicas above it (newest first); growth is the rebuild loop's job."""
    group.replicas = desired
    live = live_replicas(group)
    for replica in live[: max(len(live) - desired, 0)]:
        stop_replica(replica, reason=reason)


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
        ensure_pending_capacity(tenant=locked.tenant, adding=missing * locked.nodes_per_replica)
    except TooManyPending as refusal:
        logger.warning("group %s: %s missing replicas not rebuilt: %s", group_id, missing, refusal)
        return 0
    add_replicas(locked, missing, live=live)
    return missing


def add_replicas(group: TaskGroup, count: int, *, live: list[Replica] | None = None,
                 priority: int | None = None) -> None:
    """`count` new replicas after the newest, each whole. Its caller admitted their members (the tenant's pending
    cap, its priority ceiling)."""
    first = next_replica_index(group, live_replicas(group) if live is None else live)
    priority = group_priority(group) if priority is None else priority
    for index in range(first, first + count):
        create_replica(group, index=index, priority=priority)


def next_replica_index(group: TaskGroup, live: list[Replica]) -> int:
    """After the newest live replica; a multi-node replica's number is never reused, as its members are found by
    it."""
    if group.nodes_per_replica > 1:
        newest = group.members.aggregate(newest=Max("replica"))["newest"]
        return 0 if newest is None else newest + 1
    return max((replica.index for replica in live), default=-1) + 1


def create_replica(group: TaskGroup, *, index: int, priority: int) -> list[Task]:
    """The replica's pending members: one task numbered `index`, or `nodes_per_replica` members ranked 0…n-1."""
    if group.nodes_per_replica == 1:
        return [create_member(group, rank=index, priority=priority)]
    return [create_member(group, rank=rank, priority=priority, replica=index)
            for rank in range(group.nodes_per_replica)]


def create_member(group: TaskGroup, *, rank: int, priority: int | None = None, replica: int | None = None) -> Task:
    return task_create(
        tenant=group.tenant,
        name=f"{group.name}-{rank}" if replica is None else f"{group.name}-{replica}-{rank}",
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
        replica=replica,
        tolerations=group.tolerations,
        node_selector=group.node_selector,
        labels=group.labels,
        timeout_seconds=group.timeout_seconds,
        termination_grace_seconds=group.termination_grace_seconds,
    )


def group_priority(group: TaskGroup) -> int:
    first = group.members.order_by("id").values_list("priority", flat=True).first()
    return first if first is not None else 50
