"""The preemption watchdog (design §9): a victim whose stop is not confirmed in time is settled anyway — within
60 s, or its grace + 30 s when that is longer (design §17.1: the agent gives the container its grace before the
kill, and the report may take a heartbeat or two more)."""

import logging
from datetime import datetime, timedelta

from django.db.models import DurationField, ExpressionWrapper, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from scheduling import lifecycle
from scheduling.models import GRACE_OF_STOP, Task
from scheduling.preemption.settle import settle_preempted

logger = logging.getLogger(__name__)

CONFIRMATION_TIMEOUT = timedelta(seconds=60)
# Beyond the task's grace, the time left for the kill to be confirmed.
REPORT_MARGIN = timedelta(seconds=30)


def preemption_watchdog(now: datetime | None = None) -> int:
    """Force along the settlement arc every task `preempting` for longer than max(60 s, its grace + 30 s);
    returns how many it settled.

    Each settlement is the same CAS the agent's report makes, so a report racing the watchdog settles nothing twice.
    """
    allowed = ExpressionWrapper(
        Greatest(Value(CONFIRMATION_TIMEOUT), GRACE_OF_STOP * Value(timedelta(seconds=1))
                 + Value(REPORT_MARGIN)),
        output_field=DurationField(),
    )
    overdue = list(
        Task.objects.filter(status=lifecycle.PREEMPTING, status_changed_at__lt=(now or timezone.now()) - allowed)
        .order_by("status_changed_at", "id")
        .values_list("id", flat=True)
    )
    settled = [task_id for task_id in overdue if settle_preempted(task_id, forced=True)]
    if settled:
        logger.warning("preemption watchdog forced %s unconfirmed victim(s) back to pending: %s", len(settled),
                       ", ".join(map(str, settled)))
    return len(settled)
