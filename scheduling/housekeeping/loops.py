"""The housekeeping tickers: backlog recovery, task timeouts, training wake-up (docs/scheduling.md, Nodes and the
other loops)."""

import logging
import random
from datetime import datetime, timedelta

from django.db.models import F, Q
from django.utils import timezone

from nodes.models import Node
from scheduling import lifecycle
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, task_info_from_row
from scheduling.framework.framework import Framework
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.housekeeping.isolation import isolated
from scheduling.lifecycle import TIMEOUT_REASON
from scheduling.models import Task, TaskType
from scheduling.queue import immediate_queue
from scheduling.queue.services import queue_activate
from scheduling.selectors import current_plugin_set
from scheduling.services.task_transition import task_transition

logger = logging.getLogger(__name__)

UNCLAIMED_AFTER = timedelta(minutes=5)
ONE_SECOND = timedelta(seconds=1)
# Attempt codes of a training task that waits for cards rather than for something else (quota, type…).
WAITING_FOR_CARDS = ("InsufficientResources", "PreemptionPending", "NoSchedulableNodes")


def recover_backlog(now: datetime | None = None) -> int:
    """Send back to pending the scheduled tasks whose node went offline or that no agent claimed in 5 minutes."""
    now = now or timezone.now()
    stuck = Task.objects.filter(status=lifecycle.SCHEDULED).filter(
        Q(node__status=Node.Status.OFFLINE) | Q(node__isnull=True) | Q(scheduled_at__lt=now - UNCLAIMED_AFTER)
    )
    recovered = 0
    for task_id, node_status in stuck.values_list("id", "node__status"):
        reason = "node offline" if node_status == Node.Status.OFFLINE else "not claimed by an agent within 5 minutes"
        if isolated(lambda: task_transition(task_id, lifecycle.SCHEDULED, lifecycle.PENDING,
                                            reason=f"backlog recovery: {reason}"),
                    what=f"backlog recovery of task {task_id}"):
            recovered += 1
    return recovered


def enforce_task_timeouts(now: datetime | None = None) -> int:
    """Running longer than its own `timeout_seconds` ⇒ stopping (the agent stops it within its grace), then failed
    with `Timeout`; a task without one (an inference replica, unless its group set one) runs until stopped
    (design §17.1)."""
    now = now or timezone.now()
    overdue = Task.objects.filter(
        status=lifecycle.RUNNING, timeout_seconds__isnull=False,
        started_at__lt=now - F("timeout_seconds") * ONE_SECOND,
    ).values_list("id", flat=True)
    return sum(bool(isolated(lambda: task_transition(task_id, lifecycle.RUNNING, lifecycle.STOPPING,
                                                     reason=TIMEOUT_REASON),
                             what=f"timeout of task {task_id}"))
               for task_id in overdue)


def wake_borrowed_training() -> int:
    """Re-queue pending training tasks that waited for cards, now that the framework finds them a node (its own
    rule of what fits, over a fresh snapshot; nothing is bound here)."""
    waiting = list(Task.objects.filter(status=lifecycle.PENDING, type=TaskType.TRAINING,
                                       attempt__code__in=WAITING_FOR_CARDS).values_list(*TASK_INFO_FIELDS))
    if not waiting:
        return 0
    framework = Framework(current_plugin_set(), SchedulerConfig.from_settings())
    snapshot = build_snapshot()
    rng = random.Random(0)  # ties between nodes do not matter: only whether one fits
    woken = [task.id for task in map(task_info_from_row, waiting)
             if framework.schedule(task, snapshot, rng).node is not None]
    if woken:
        # Parked ones go back to the active queue at once; the immediate queue makes the next cycle start sooner.
        queue_activate(reason="training wake-up", task_ids=woken)
        for task_id in woken:
            immediate_queue.push(task_id)
    return len(woken)
