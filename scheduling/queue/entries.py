"""Reading the scheduling queue: the first active entries in queue order (design §15.1).

An entry is a single pending task, or a training gang (world_size > 1) with pending members, which is placed whole
and ranks by its highest member priority and its own creation time. Each side is read along its order with its own
limit (the task side walks the `task_queue_order` index), then the two are merged.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from scheduling import lifecycle
from scheduling.models import Task, TaskGroup, TaskType

TASK = "task"
GANG = "gang"
_TASKS = Task._meta.db_table
_GROUPS = TaskGroup._meta.db_table
_ACTIVE = "(t.parked_until IS NULL OR t.parked_until <= clock_timestamp())"

_TAKE_ACTIVE = f"""
(SELECT '{TASK}' AS kind, t.id, t.priority, t.created_at, t.tenant_id
   FROM {_TASKS} t
  WHERE t.status = %(pending)s AND {_ACTIVE}
    AND NOT EXISTS (SELECT 1 FROM {_GROUPS} g
                     WHERE g.id = t.group_id AND g.type = %(training)s AND g.world_size > 1)
  ORDER BY t.priority DESC, t.created_at, t.id
  LIMIT %(limit)s)
UNION ALL
(SELECT '{GANG}', g.id, max(t.priority), g.created_at, g.tenant_id
   FROM {_GROUPS} g JOIN {_TASKS} t ON t.group_id = g.id AND t.status = %(pending)s
  WHERE g.type = %(training)s AND g.world_size > 1 AND g.status <> %(stopped)s
  GROUP BY g.id, g.created_at, g.tenant_id
 HAVING bool_and({_ACTIVE})
  ORDER BY max(t.priority) DESC, g.created_at, g.id
  LIMIT %(limit)s)
ORDER BY priority DESC, created_at, kind DESC, id
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class QueueEntry:
    kind: str  # TASK or GANG
    id: int  # task id or group id
    priority: int
    created_at: datetime
    tenant_id: int | None = None


def take_active(limit: int) -> list[QueueEntry]:
    """The first `limit` active entries in queue order: priority descending, then creation time, then id."""
    with connection.cursor() as cursor:
        cursor.execute(_TAKE_ACTIVE, {"pending": lifecycle.PENDING, "training": TaskType.TRAINING,
                                      "stopped": TaskGroup.Status.STOPPED, "limit": limit})
        return [QueueEntry(*row) for row in cursor.fetchall()]
