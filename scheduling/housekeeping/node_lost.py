"""Lost nodes and what their agents really run (design §15.4).

A node offline for longer than `node_lost_timeout` is lost: each of its active tasks leaves it in a transaction
of its own — `scheduled → pending`, `running → failed` (`NodeLost`), `stopping → stopped` (or `failed` for a
timeout), `preempting` settled as the watchdog settles it — and the transition frees cards, ledgers and quota.
A gang that loses a member this way is then made whole by `scheduling.groups.restart`.

The agent's heartbeat lists the tasks it runs; `tasks_to_kill` answers which of them it must kill: those the
control plane no longer places on that node in a running state (lost, settled, stopped, unknown). The other way
round, `fail_tasks_the_agent_lost`: a task running there by the control plane that its agent does not run has ended
without a report (an agent killed between claiming a task and starting it, or with the task's end unreported).
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from nodes.models import Node
from scheduling import lifecycle
from scheduling.groups.restart import reconciles_deferred
from scheduling.lifecycle import ACTIVE_STATES, AGENT_LOST_REASON, NODE_LOST_REASON
from scheduling.models import Task
from scheduling.preemption.settle import settle_preempted
from scheduling.services.task_transition import task_transition

logger = logging.getLogger(__name__)

# What the agent may still be running for a task: the control plane expects a container in these states only.
_CONTAINER_STATES = (lifecycle.RUNNING, lifecycle.STOPPING, lifecycle.PREEMPTING)


@dataclass
class NodeLostRun:
    """What one sweep did: the lost nodes it found and, per task, the arc it took."""

    nodes: list[str] = field(default_factory=list)
    requeued: int = 0
    failed: int = 0
    stopped: int = 0
    settled: int = 0

    @property
    def released(self) -> int:
        return self.requeued + self.failed + self.stopped + self.settled

    def summary(self) -> str:
        if not self.nodes:
            return "no lost node"
        return (f"{len(self.nodes)} lost node(s) ({', '.join(self.nodes)}): {self.released} task(s) released — "
                f"{self.requeued} back to pending, {self.failed} failed NodeLost, {self.stopped} stopped, "
                f"{self.settled} preemption(s) settled")


def node_lost_cutoff(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) - timedelta(seconds=settings.SCHEDULER["node_lost_timeout"])


def lost(cutoff: datetime) -> Q:
    """Nodes offline whose last heartbeat (or, never having sent one, whose registration) is older than `cutoff`."""
    return Q(status=Node.Status.OFFLINE) & (
        Q(last_heartbeat_at__lt=cutoff) | Q(last_heartbeat_at__isnull=True, created_at__lt=cutoff)
    )


def release_lost_nodes(now: datetime | None = None) -> NodeLostRun:
    """The node-lost ticker: every active task of every lost node leaves it."""
    cutoff = node_lost_cutoff(now)
    run = NodeLostRun()
    nodes = dict(Node.objects.filter(lost(cutoff)).values_list("id", "name"))
    held = list(Task.objects.filter(node_id__in=nodes, status__in=ACTIVE_STATES).order_by("id")
                .values_list("id", "node_id"))
    # Every task of a lost node fails for being there, gang members too, before their gangs are made whole.
    with reconciles_deferred():
        for task_id, node_id in held:
            arc = _release(task_id, node_id=node_id, node_name=nodes[node_id], cutoff=cutoff)
            if arc is not None:
                setattr(run, arc, getattr(run, arc) + 1)
    run.nodes = sorted({nodes[node_id] for _task_id, node_id in held})
    if run.released:
        logger.warning("node-lost: %s", run.summary())
    return run


def _release(task_id: int, *, node_id: int, node_name: str, cutoff: datetime) -> str | None:
    """One task off its lost node in one transaction; the run counter it adds to, None if it had moved on."""
    with transaction.atomic():
        # Locked first, so an agent report or a user stop of this task either committed already or waits for us.
        task = Task.objects.select_for_update().filter(id=task_id, node_id=node_id).only("status", "reason").first()
        if task is None or task.status not in ACTIVE_STATES:
            return None
        # A heartbeat that arrived meanwhile brought the node back: its agent carries on with the task.
        if not Node.objects.filter(lost(cutoff), id=node_id).exists():
            return None
        status = task.status
        gone = f"{NODE_LOST_REASON}: node {node_name} offline for more than {settings.SCHEDULER['node_lost_timeout']} s"
        if status == lifecycle.SCHEDULED:
            won = task_transition(task_id, status, lifecycle.PENDING, reason=gone)
            return "requeued" if won else None
        if status == lifecycle.RUNNING:
            won = task_transition(task_id, status, lifecycle.FAILED, reason=NODE_LOST_REASON)
            return "failed" if won else None
        if status == lifecycle.STOPPING:
            won = task_transition(task_id, status, lifecycle.final_status_after_stop(task.reason))
            return "stopped" if won else None
        return "settled" if settle_preempted(task_id, forced=True, reason=f"preempted: {gone}") else None


def tasks_to_kill(*, node_id: int, running: Iterable[int]) -> list[int]:
    """Of the task ids an agent says it runs, those it must kill: not, or no longer, placed on its node in a
    running state (design §15.4). A task it should still stop gracefully stays in its work list instead."""
    reported = set(running)
    if not reported:
        return []
    expected = set(Task.objects.filter(id__in=reported, node_id=node_id, status__in=_CONTAINER_STATES)
                   .values_list("id", flat=True))
    return sorted(reported - expected)


def fail_tasks_the_agent_lost(*, node_id: int, running: Iterable[int], now: datetime | None = None) -> list[int]:
    """The tasks `running` on the node by the control plane that the agent's heartbeat does not list fail with
    `AgentLost`, once running for longer than the heartbeat timeout (a task claimed in one agent step is listed
    from the next; an agent delivers its held reports before it heartbeats). Their cards are freed. The ids."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.SCHEDULER["heartbeat_timeout"])
    unlisted = (Task.objects.filter(node_id=node_id, status=lifecycle.RUNNING, status_changed_at__lt=cutoff)
                .exclude(id__in=set(running)).values_list("id", flat=True))
    failed = [task_id for task_id in unlisted
              if task_transition(task_id, lifecycle.RUNNING, lifecycle.FAILED,
                                 reason=f"{AGENT_LOST_REASON}: the node's agent does not run it")]
    if failed:
        logger.warning("node %s: task(s) %s failed, its agent does not run them", node_id, failed)
    return failed
