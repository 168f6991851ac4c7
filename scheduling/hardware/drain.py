"""Drain and uncordon (design §17.3): an admin takes a node out for repair. Drain cordons it and stops each of its
tasks: batch back to pending, gangs restarted elsewhere as in §15.5, and a service's replica replaced elsewhere
first — a replacement is created off the draining nodes and the replica stops only once the group has as many ready
replicas elsewhere as it wants (or the group's `ready_timeout_seconds` since the drain began have passed, so a
replacement that cannot be placed does not hold the node forever, and then only as the group's disruption budget
allows). The node reads `drained` once nothing holds it. The state is the node's row, and the leader-only drain
ticker carries every drain on, so a drain survives a restart of the web or the scheduler."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from heteroflow_site.errors import Conflict, TooManyPending
from nodes.models import DrainState, Node, NodeAuditEntry
from nodes.selectors import NodeMaintenance
from nodes.signals import node_changed, node_drained
from scheduling import lifecycle
from scheduling.groups.budget import budget_permits
from scheduling.groups.replica_state import replica_ready
from scheduling.groups.replicas import add_replicas, live_replicas
from scheduling.hardware.evict import EVICTABLE_STATES, evict_task
from scheduling.lifecycle import ACTIVE_STATES, NODE_DRAIN_REASON
from scheduling.models import Task, TaskGroup, TaskType
from scheduling.services.task_create import ensure_pending_capacity
from scheduling.services.task_transition import task_transition

logger = logging.getLogger(__name__)

DRAIN_LOCK_KEY = 0x4846_4452  # "HFDR": the drain ticker's leader lock
DRAIN_ACTION = "node.drain"
UNCORDON_ACTION = "node.uncordon"


@dataclass(frozen=True)
class DrainRun:
    leader: bool
    stopping: int = 0
    drained: tuple[str, ...] = ()


def node_drain(*, node: Node, grace_seconds: int | None, actor) -> Node:
    """Cordon the node and start its drain (audited); its tasks start stopping at once. Draining a node that is
    draining already changes only the grace."""
    with transaction.atomic():
        locked = Node.objects.select_for_update().get(id=node.id)
        active = Task.objects.filter(node_id=node.id, status__in=ACTIVE_STATES).count()
        if locked.drain_state == DrainState.DRAINING:
            Node.objects.filter(id=node.id).update(drain_grace_seconds=grace_seconds)
        else:
            Node.objects.filter(id=node.id).update(
                schedulable=False, drain_state=DrainState.DRAINING, drain_grace_seconds=grace_seconds,
                drain_started_at=timezone.now(), drain_tasks_at_start=active)
        NodeAuditEntry.objects.create(node=locked, actor=actor, action=DRAIN_ACTION,
                                      before={"schedulable": locked.schedulable, "drain_state": locked.drain_state},
                                      after={"schedulable": False, "drain_state": DrainState.DRAINING,
                                             "grace_seconds": grace_seconds})
        _drain_one(node.id)
    node.refresh_from_db()
    return node


def node_uncordon(*, node: Node, actor) -> Node:
    """End a drain (or a cordon): the node is schedulable again (audited). Tasks already stopping finish
    stopping."""
    with transaction.atomic():
        locked = Node.objects.select_for_update().get(id=node.id)
        if locked.schedulable and not locked.drain_state:
            raise Conflict(f"node {locked.name} is neither cordoned nor drained", field="node")
        Node.objects.filter(id=node.id).update(schedulable=True, drain_state=DrainState.NONE,
                                               drain_grace_seconds=None, drain_started_at=None,
                                               drain_tasks_at_start=0)
        NodeAuditEntry.objects.create(node=locked, actor=actor, action=UNCORDON_ACTION,
                                      before={"schedulable": locked.schedulable, "drain_state": locked.drain_state},
                                      after={"schedulable": True, "drain_state": DrainState.NONE})
        node_changed.send(sender=Node, node_id=node.id, reason=f"node {locked.name} uncordoned")
    node.refresh_from_db()
    return node


def drain_nodes() -> DrainRun:
    """The drain ticker: for every draining node, stop what still runs there and mark it drained when nothing is
    left. One instance at a time (a PostgreSQL advisory lock); each node in its own transaction."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [DRAIN_LOCK_KEY])
            if not cursor.fetchone()[0]:
                return DrainRun(leader=False)
        stopping, drained = 0, []
        for node_id in Node.objects.filter(drain_state=DrainState.DRAINING).values_list("id", flat=True):
            with transaction.atomic():
                moved, name = _drain_one(node_id)
            stopping += moved
            if name:
                drained.append(name)
    return DrainRun(leader=True, stopping=stopping, drained=tuple(drained))


def _drain_one(node_id: int) -> tuple[int, str | None]:
    """Stop the node's evictable tasks; mark it drained when no active task is left. Returns how many tasks this
    call set stopping and the node's name if it is drained now."""
    node = Node.objects.select_for_update().filter(id=node_id, drain_state=DrainState.DRAINING).first()
    if node is None:
        return 0, None
    moved = 0
    reason = f"{NODE_DRAIN_REASON}: node {node.name} is draining"
    for task_id, status, group_id, task_type in Task.objects.filter(
            node_id=node_id, status__in=EVICTABLE_STATES).values_list("id", "status", "group_id", "type"):
        if group_id is not None and task_type == TaskType.INFERENCE:
            moved += _replace_then_stop(node, task_id=task_id, status=status, group_id=group_id, reason=reason)
        elif not budget_permits(task_id=task_id, action=f"drain of node {node.name}"):
            continue
        elif evict_task(task_id=task_id, status=status, grace_seconds=node.drain_grace_seconds, reason=reason):
            moved += 1
    if Task.objects.filter(node_id=node_id, status__in=ACTIVE_STATES).exists():
        return moved, None
    if Node.objects.filter(id=node_id, drain_state=DrainState.DRAINING).update(drain_state=DrainState.DRAINED):
        logger.info("node %s is drained", node.name)
        transaction.on_commit(lambda: node_drained.send(sender=Node, node_id=node_id, name=node.name))
        return moved, node.name
    return moved, None


def _replace_then_stop(node: Node, *, task_id: int, status: str, group_id: int, reason: str) -> int:
    """A service's replica on a draining node: stop it (1) once the group has its desired count of ready replicas
    off draining nodes, else make sure a replacement is on its way there and wait (0)."""
    group = TaskGroup.objects.select_for_update().select_related("tenant").get(id=group_id)
    draining = set(Node.objects.filter(drain_state=DrainState.DRAINING).values_list("id", flat=True))
    live = live_replicas(group)
    # A multi-node replica with a member on a draining node goes with it (design §17.1): it is not elsewhere.
    elsewhere = [replica for replica in live if not replica.node_ids & draining]
    ready_elsewhere = sum(1 for replica in elsewhere if replica_ready(group, replica))
    waited_enough = node.drain_started_at is not None and timezone.now() - node.drain_started_at >= timedelta(
        seconds=group.ready_timeout_seconds)
    replaced = group.stopped_at is not None or ready_elsewhere >= (group.replicas or 0)
    if replaced or (waited_enough and budget_permits(task_id=task_id, action=f"drain of node {node.name}")):
        changes = {} if node.drain_grace_seconds is None else {"stop_grace_seconds": node.drain_grace_seconds}
        return int(task_transition(task_id, status, lifecycle.STOPPING, reason=reason, **changes))
    if len(elsewhere) < (group.replicas or 0):
        try:
            ensure_pending_capacity(tenant=group.tenant, adding=group.nodes_per_replica)
        except TooManyPending as refusal:
            logger.warning("node %s: no replacement for replica %s of group %s yet: %s", node.name, task_id,
                           group_id, refusal)
            return 0
        add_replicas(group, 1, live=live)
        logger.info("node %s: a replacement for replica %s of group %s is on its way", node.name, task_id, group_id)
    return 0


def drain_progress(node: Node) -> dict | None:
    """What the node page and the API show of a drain: its state, since when, the grace, how many tasks it found
    and how many still hold the node; None when the node is not draining or drained."""
    if not node.drain_state:
        return None
    left = Task.objects.filter(node_id=node.id, status__in=ACTIVE_STATES).count()
    return {"state": node.drain_state, "started_at": node.drain_started_at, "grace_seconds": node.drain_grace_seconds,
            "tasks_at_start": node.drain_tasks_at_start, "tasks_left": left}


NODE_MAINTENANCE = NodeMaintenance(progress=drain_progress, drain=node_drain, uncordon=node_uncordon)
