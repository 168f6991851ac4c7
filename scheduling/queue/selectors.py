"""Reading a task's place in the scheduling queue for the pages (design §15.1)."""

from datetime import datetime

from django.utils import timezone

from scheduling import lifecycle
from scheduling.models import Task


def queue_state(task: Task, *, now: datetime | None = None) -> dict | None:
    """For a pending task: `parked` (waiting for its backoff or an event), `retry_at` (when the backoff ends),
    `failed_attempts` in a row, the `nominated_node` name and `reserved_at` (design §16.3: the node is held for it
    as its GPU type's reserved job); None for a task that is not pending."""
    if task.status != lifecycle.PENDING:
        return None
    now = now or timezone.now()
    parked = task.parked_until is not None and task.parked_until > now
    return {
        "parked": parked,
        "retry_at": task.parked_until if parked else None,
        "failed_attempts": task.queue_backoff,
        "nominated_node": task.nominated_node.name if task.nominated_node_id else None,
        "reserved_at": task.reserved_at,
    }
