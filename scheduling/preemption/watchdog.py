"""The preemption watchdog (design §9): a victim whose stop is not confirmed within 60 s is settled anyway."""

import logging
from datetime import datetime, timedelta

from django.utils import timezone

from scheduling import lifecycle
from scheduling.models import Task
from scheduling.preemption.settle import settle_preempted

logger = logging.getLogger(__name__)

CONFIRMATION_TIMEOUT = timedelta(seconds=60)


def preemption_watchdog(now: datetime | None = None) -> int:
    """Force along the settlement arc every task `preempting` for more than 60 s; returns how many it settled.

    Each settlement is the same CAS the agent's report makes, so a report racing the watchdog settles nothing twice.
    """
    cutoff = (now or timezone.now()) - CONFIRMATION_TIMEOUT
    overdue = list(
        Task.objects.filter(status=lifecycle.PREEMPTING, status_changed_at__lt=cutoff)
        .order_by("status_changed_at", "id")
        .values_list("id", flat=True)
    )
    settled = [task_id for task_id in overdue if settle_preempted(task_id, forced=True)]
    if settled:
        logger.warning("preemption watchdog forced %s unconfirmed victim(s) back to pending: %s", len(settled),
                       ", ".join(map(str, settled)))
    return len(settled)
