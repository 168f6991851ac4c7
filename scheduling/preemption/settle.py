"""Settling a preemption once its container is gone (design §9): the victim goes back to the queue, once."""

import logging

import redis
from django.db import transaction
from django.db.models import F

from scheduling import lifecycle
from scheduling.queue import immediate_queue
from scheduling.models import SchedulingAttempt, Task
from scheduling.services.task_transition import task_transition

logger = logging.getLogger(__name__)

CONFIRMED_REASON = "preempted: container stopped"
FORCED_REASON = "preempted: no stop confirmation within 60 s, forced by the watchdog"


def settle_preempted(task_id: int, *, forced: bool = False, reason: str = "") -> bool:
    """CAS `preempting → pending` and hand back everything the victim held; True if this call settled it.

    One transaction: the CAS (whose placement reset clears node, cards, port and shard and returns the node's
    `gpu_used`), `preempt_count + 1` and `preemptible = false` (a task is evicted at most once). The agent's report and
    the watchdog both come here; the CAS lets exactly one of them win, the other changes nothing.

    A task stopped because its card failed or its node drains (design §17.3) settles the same way but was not
    preempted: its count and preemptibility stay, and its reason keeps saying why it left.
    """
    with transaction.atomic():
        hardware = _evicted_for_hardware(task_id)
        if hardware is not None:
            reason = f"{hardware}: container stopped, back to pending"
            counting = {}
        else:
            reason = reason or (FORCED_REASON if forced else CONFIRMED_REASON)
            counting = {"preempt_count": F("preempt_count") + 1, "preemptible": False}
        settled = task_transition(task_id, lifecycle.PREEMPTING, lifecycle.PENDING, reason=reason, **counting)
        if settled and hardware is not None:
            # Nobody waits for its room: the task itself goes first, before the next tick.
            transaction.on_commit(lambda: _wake(task_id))
        elif settled:
            preemptor_id = (
                SchedulingAttempt.objects.filter(task_id=task_id)
                .values_list("extra__preempted_by", flat=True)
                .first()
            )
            if preemptor_id is not None:
                # The room is real now: let the preemptor try before the next tick.
                transaction.on_commit(lambda: _wake(int(preemptor_id)))
    return settled


def _evicted_for_hardware(task_id: int) -> str | None:
    """The hardware reason a `preempting` task was stopped for, else None. Its reason is set by the arc into
    `preempting` and changes only with the next arc, which the caller's CAS orders."""
    reason = Task.objects.filter(id=task_id, status=lifecycle.PREEMPTING).values_list("reason", flat=True).first()
    return next((prefix for prefix in lifecycle.HARDWARE_EVICTION_REASONS if (reason or "").startswith(prefix)), None)


def _wake(task_id: int) -> None:
    # Only a shortcut: the task is pending and the next cycle reaches it anyway.
    try:
        immediate_queue.push(task_id)
    except redis.RedisError:
        logger.warning("could not queue task %s after a settled preemption", task_id, exc_info=True)
