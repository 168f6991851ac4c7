"""A card that reported `failed` is quarantined by the heartbeat (`nodes.card_health`); here its tasks are
stopped, in the heartbeat's own transaction, and go back to pending (design §17.3)."""

from __future__ import annotations

import logging

from django.dispatch import receiver

from nodes.models import Node
from nodes.signals import cards_quarantined
from scheduling.hardware.evict import evict_task, tasks_on_cards
from scheduling.lifecycle import CARD_FAILED_REASON

logger = logging.getLogger(__name__)


@receiver(cards_quarantined, dispatch_uid="scheduling.hardware.quarantine.stop_tasks_on_quarantined_cards")
def stop_tasks_on_quarantined_cards(sender, *, node_id: int, cards: list[tuple[str, int]], **kwargs) -> None:
    name, gpu_type = Node.objects.filter(id=node_id).values_list("name", "gpu_type").get()
    names = ", ".join(f"{card_type}{index}" for card_type, index in cards)
    for task_id, status in tasks_on_cards(node_id=node_id, node_gpu_type=gpu_type, cards=cards):
        if evict_task(task_id=task_id, status=status,
                      reason=f"{CARD_FAILED_REASON}: card {names} of node {name} failed and is quarantined"):
            logger.warning("task %s stopped: card %s of node %s is quarantined", task_id, names, name)
