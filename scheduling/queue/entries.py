"""Reading the scheduling queue: the first active entries in queue order (design §15.1).

An entry is a single pending task, or a gang with pending members, which is placed whole and ranks by its highest
member priority and its creation time: a training gang (world_size > 1), created with its group, or one multi-node
replica of an inference group (design §17.1; members with a `replica` number), created with its members. Each side
is read along its order with its own limit (the task side walks the `task_queue_order` index), then the two are
merged.

The walk does not depend on the planner's statistics. On a table never analysed (right after a bulk load) the
planner expects a handful of pending tasks, and a bitmap scan of every pending task and a sort look cheaper than the
walk that stops after `limit` rows — ~8 ms a cycle at 10,000 pending against ~1 ms. The read is made with bitmap
scans off for its transaction (`_WALK_THE_INDEX`), which leaves the walk, the plan the statistics give anyway.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from scheduling import lifecycle
from scheduling.models import Task, TaskGroup, TaskType

TASK = "task"
GANG = "gang"
_TASKS = Task._meta.db_table
_GROUPS = TaskGroup._meta.db_table
_ACTIVE = "(t.parked_until IS NULL OR t.parked_until <= clock_timestamp())"

# A pending task placed one by one: no multi-node replica's member, no training gang's.
SINGLE_TASK = f"""t.replica IS NULL
    AND NOT EXISTS (SELECT 1 FROM {_GROUPS} g
                     WHERE g.id = t.group_id AND g.type = %(training)s AND g.world_size > 1)"""
# The pending members of gangs, one row per gang (the replica NULL for a training gang) with `gang_created_at`.
GANG_MEMBERS = f"""{_GROUPS} g JOIN {_TASKS} t ON t.group_id = g.id AND t.status = %(pending)s
  WHERE (g.type = %(training)s AND g.world_size > 1 OR t.replica IS NOT NULL) AND g.status <> %(stopped)s
  GROUP BY g.id, t.replica"""
GANG_CREATED_AT = "CASE WHEN t.replica IS NULL THEN g.created_at ELSE min(t.created_at) END"

_WALK_THE_INDEX = "SET LOCAL enable_bitmapscan TO off"
_TAKE_ACTIVE = f"""
(SELECT '{TASK}' AS kind, t.id, t.priority, t.created_at, t.tenant_id, NULL::integer AS replica
   FROM {_TASKS} t
  WHERE t.status = %(pending)s AND {_ACTIVE} AND {SINGLE_TASK}
  ORDER BY t.priority DESC, t.created_at, t.id
  LIMIT %(limit)s)
UNION ALL
(SELECT '{GANG}', g.id, max(t.priority), {GANG_CREATED_AT}, g.tenant_id, t.replica
   FROM {GANG_MEMBERS}
 HAVING bool_and({_ACTIVE})
  ORDER BY 3 DESC, 4, 2, 6
  LIMIT %(limit)s)
ORDER BY priority DESC, created_at, kind DESC, id, replica
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class QueueEntry:
    kind: str  # TASK or GANG
    id: int  # task id or group id
    priority: int
    created_at: datetime
    tenant_id: int | None = None
    # The multi-node replica a GANG entry places (design §17.1); None for a task or a training gang.
    replica: int | None = None

    @property
    def key(self) -> tuple:
        """What the entry places: (kind, id) of a task or a training gang, (GANG, group id, replica) of one replica
        of a service."""
        return (self.kind, self.id) if self.replica is None else (self.kind, self.id, self.replica)


def take_active(limit: int) -> list[QueueEntry]:
    """The first `limit` active entries in queue order: priority descending, then creation time, then id. One round
    trip for the setting and the read, pipelined, and the commit."""
    with transaction.atomic():
        connection.ensure_connection()
        raw = connection.connection
        with raw.pipeline():
            raw.execute(_WALK_THE_INDEX)
            read = raw.execute(_TAKE_ACTIVE, {"pending": lifecycle.PENDING, "training": TaskType.TRAINING,
                                              "stopped": TaskGroup.Status.STOPPED, "limit": limit})
        return [QueueEntry(*row) for row in read.fetchall()]
