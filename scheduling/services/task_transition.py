from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from nodes.models import Node
from scheduling import lifecycle, metrics
from scheduling.lifecycle import ACTIVE_STATES, check_transition
from scheduling.models import Task, TaskEvent
from scheduling.queue.services import queue_activate
from scheduling.signals import group_members_moved, task_transitioned
from scheduling.usage.records import record_placement_end

# Returning to the queue forgets the placement and enters the queue active (design §15.1); finishing keeps node and
# cards as history.
# The environment goes back to the submitter's: the control plane's variables belonged to the placement.
_PLACEMENT_CLEARED = {"node": None, "gpus": [], "card_type": "", "port": None, "shard": None,
                      "env": F("submitted_env"), "borrowed": False, "queue_backoff": 0, "parked_until": None,
                      "ready": False, "ready_at": None, "stop_grace_seconds": None}


def task_transition(task_id: int, from_status: str, to_status: str, *, reason: str = "",
                    derive_group_status: bool = True, **changes: Any) -> bool:
    """Compare-and-swap the task from `from_status` to `to_status`; True if this call won (docs/scheduling.md, Tasks
    and their lifecycle).

    The conditional UPDATE, the GPU ledger, the timeline row and any caller side effects run in one transaction,
    so a failure in any of them leaves the task as it was. The loser of a race changes nothing. A caller moving
    many members of one group in its own transaction passes `derive_group_status=False` and refreshes the group's
    status once at the end instead of once per member.
    """
    check_transition(from_status, to_status)
    reason = lifecycle.fitting_reason(reason)
    now = timezone.now()
    with transaction.atomic():
        # The row lock makes the placement we read the one our UPDATE replaces, even under A→B→A races.
        held = (
            Task.objects.select_for_update()
            .filter(id=task_id, status=from_status)
            .values("node_id", "gpu_required", "tenant_id", "group_id", "card_type", "gpu_type", "created_at")
            .first()
        )
        if held is None:
            return False
        if from_status in ACTIVE_STATES and to_status not in ACTIVE_STATES:
            record_placement_end(task_id=task_id, ended_at=now)
        if to_status == lifecycle.PENDING:
            changes = {**_PLACEMENT_CLEARED, **changes}
        changes.update(_timestamps(to_status, now))
        # A task that ends says why it ended (this arc's reason, or from `stopping` the one its stop was asked
        # with), or nothing: the placement's "bound to <node>" does not outlive the placement.
        if reason or (to_status in lifecycle.TERMINAL_STATES and from_status != lifecycle.STOPPING):
            changes["reason"] = reason
        won = Task.objects.filter(id=task_id, status=from_status).update(
            status=to_status, status_changed_at=now, **changes
        )
        if won != 1:
            return False
        _apply_gpu_ledger(
            from_status=from_status,
            to_status=to_status,
            gpu_required=held["gpu_required"],
            node_before=held["node_id"],
            node_after=_node_id(changes["node"]) if "node" in changes else held["node_id"],
        )
        if from_status in ACTIVE_STATES and to_status not in ACTIVE_STATES and held["node_id"] is not None:
            queue_activate(reason=f"task {task_id} left node {held['node_id']}",
                           gpu_types=[held["card_type"]] if held["card_type"] else None)
        TaskEvent.objects.create(task_id=task_id, from_status=from_status, to_status=to_status, reason=reason)
        if to_status == lifecycle.RUNNING:
            transaction.on_commit(lambda: metrics.record_start(
                gpu_type=held["card_type"] or held["gpu_type"], gpu_required=held["gpu_required"],
                seconds=(now - held["created_at"]).total_seconds()))
        after_arcs_won([WonArc(task_id, held["tenant_id"], held["group_id"], reason)], from_status=from_status,
                       to_status=to_status, derive_group_status=derive_group_status)
    return True


@dataclass(frozen=True)
class WonArc:
    """One task whose compare-and-swap won, as what follows it needs it."""

    task_id: int
    tenant_id: int
    group_id: int | None
    reason: str


def after_arcs_won(arcs: Sequence[WonArc], *, from_status: str, to_status: str,
                   derive_group_status: bool = True) -> None:
    """What follows won arcs inside their transaction, for one task (`task_transition`) or a claimed batch (bind's
    claim): the groups' rules, once per group (`group_members_moved`), and `task_transitioned` after the commit
    for each task — every arc's one path."""
    group_ids = sorted({arc.group_id for arc in arcs if arc.group_id is not None})
    if group_ids:
        group_members_moved.send(sender=Task, group_ids=group_ids, to_status=to_status,
                                 derive_group_status=derive_group_status)
    for arc in arcs:
        transaction.on_commit(
            lambda arc=arc: task_transitioned.send(sender=Task, task_id=arc.task_id, tenant_id=arc.tenant_id,
                                                   from_status=from_status, to_status=to_status, reason=arc.reason)
        )


def _apply_gpu_ledger(*, from_status: str, to_status: str, gpu_required: int, node_before, node_after) -> None:
    """The real-time ledger: `gpu_used` moves exactly when a task enters or leaves the active states."""
    was_active = from_status in ACTIVE_STATES
    is_active = to_status in ACTIVE_STATES
    if gpu_required == 0 or was_active == is_active:
        return
    if is_active and node_after is not None:
        Node.objects.filter(id=node_after).update(gpu_used=F("gpu_used") + gpu_required)
    if was_active and node_before is not None:
        Node.objects.filter(id=node_before).update(gpu_used=F("gpu_used") - gpu_required)


def _node_id(node) -> int | None:
    return getattr(node, "id", node)


def _timestamps(to_status: str, now) -> dict[str, Any]:
    if to_status == lifecycle.SCHEDULED:
        return {"scheduled_at": now}
    if to_status == lifecycle.RUNNING:
        return {"started_at": now}
    if to_status in lifecycle.TERMINAL_STATES:
        return {"finished_at": now}
    if to_status == lifecycle.PENDING:
        return {"scheduled_at": None, "started_at": None}
    return {}
