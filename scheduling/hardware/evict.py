"""Taking tasks off failed cards and draining nodes (design §17.3) through the preemption stop path: the task goes
`preempting` (its agent stops the container, its cards stay held until then), then back to `pending` without
counting as a preemption (`scheduling.preemption.settle`). A gang whose member leaves restarts as in §15.5."""

from __future__ import annotations

import logging

from django.db import transaction

from scheduling import lifecycle
from scheduling.framework.occupancy import cards_held
from scheduling.models import Task
from scheduling.services.task_transition import task_transition

logger = logging.getLogger(__name__)

# Tasks that still run a container or are about to: the ones to stop. `preempting` and `stopping` are on their way.
EVICTABLE_STATES = (lifecycle.SCHEDULED, lifecycle.RUNNING)


def evict_task(*, task_id: int, status: str, reason: str, grace_seconds: int | None = None) -> bool:
    """CAS one task into `preempting` for a hardware reason; True if this call moved it. The task's own stop
    grace applies; `grace_seconds` (a drain's) replaces it for this stop only."""
    changes = {} if grace_seconds is None else {"stop_grace_seconds": grace_seconds}
    with transaction.atomic():
        return task_transition(task_id, status, lifecycle.PREEMPTING, reason=reason, **changes)


def tasks_on_cards(*, node_id: int, node_gpu_type: str, cards: list[tuple[str, int]]) -> list[tuple[int, str]]:
    """`(task id, status)` of the evictable tasks holding any of `cards` (`(type, index)`) on the node."""
    wanted = set(cards)
    holding = []
    for task_id, status, gpus, shard, card_type in (
            Task.objects.filter(node_id=node_id, status__in=EVICTABLE_STATES)
            .values_list("id", "status", "gpus", "shard", "card_type")):
        held_type = card_type or node_gpu_type
        if any((held_type, index) in wanted for index in cards_held(gpus, shard)):
            holding.append((task_id, status))
    return holding
