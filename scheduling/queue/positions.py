"""Queue positions (design §17.4): each pending task's place among the pending work of its GPU type, in the order
in force, computed once per cycle and kept in Redis for the API, the task page and `hf describe` to read; a request
never orders the queue itself.

Every pending entry counts, parked ones too (they wait like the rest); a gang is one entry, its pending members all
at its place (each multi-node replica of a service is a gang of its own, design §17.1). A task or gang asking for
no GPU type queues with the others that ask for none ("any").

Reading and publishing every pending task costs in proportion to the queue: a few milliseconds a cycle for a few
hundred, 5-8 % of a cycle's time for a few thousand, a large part of it for tens of thousands. Up to
`EVERY_CYCLE_UP_TO` pending tasks they are published every cycle; beyond, a cycle publishes them once the last
publication is `PACING` times its own cost old, so they take at most a twentieth of the scheduler's time
(`PublicationPace`).
"""

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping

from django.db import connection

from scheduling import lifecycle
from scheduling.fair_share.decayed import DecayedShare, decayed_shares
from scheduling.framework.snapshot import ClusterSnapshot
from scheduling.models import Task, TaskGroup, TaskType
from scheduling.plugins.queue_sort import FAIR_SHARE, WEIGHTED
from scheduling.queue import immediate_queue
from scheduling.queue.entries import GANG, GANG_CREATED_AT, GANG_MEMBERS, SINGLE_TASK, TASK, QueueEntry
from scheduling.queue.fair_share_order import fair_share_order
from scheduling.queue.weighted import weighted_order

logger = logging.getLogger(__name__)

POSITIONS_KEY = "heteroflow:queue-positions"
ANY_TYPE = "any"
EVERY_CYCLE_UP_TO = 1_000    # pending tasks
PACING = 19
_TASKS = Task._meta.db_table

# Every pending entry in the default order (priority, creation, tasks before gangs, id), with its GPU type and,
# for a gang, its pending members.
_ALL_PENDING = f"""
(SELECT '{TASK}' AS kind, t.id, t.priority, t.created_at, t.tenant_id, NULL::integer AS replica, t.gpu_type,
        ARRAY[t.id] AS members
   FROM {_TASKS} t
  WHERE t.status = %(pending)s AND {SINGLE_TASK})
UNION ALL
(SELECT '{GANG}', g.id, max(t.priority), {GANG_CREATED_AT}, g.tenant_id, t.replica, g.gpu_type, array_agg(t.id)
   FROM {GANG_MEMBERS})
ORDER BY priority DESC, created_at, kind DESC, id, replica
"""


def _pending_entries() -> tuple[list[QueueEntry], dict[tuple, tuple[str, list[int]]]]:
    with connection.cursor() as cursor:
        cursor.execute(_ALL_PENDING, {"pending": lifecycle.PENDING, "training": TaskType.TRAINING,
                                      "stopped": TaskGroup.Status.STOPPED})
        rows = cursor.fetchall()
    entries = [QueueEntry(*row[:6]) for row in rows]
    facts = {entry.key: (gpu_type or ANY_TYPE, members) for entry, (*_, gpu_type, members) in zip(entries, rows)}
    return entries, facts


def ordered(entries: list[QueueEntry], *, order: str, snapshot: ClusterSnapshot | None,
            shares: Mapping[int, DecayedShare] | None) -> list[QueueEntry]:
    """`entries` (in the default order) in the order in force, as the cycle orders its window."""
    if order == FAIR_SHARE:
        if shares is None:
            shares = decayed_shares(entry.tenant_id for entry in entries)
        return fair_share_order(entries, shares)
    if order == WEIGHTED and snapshot is not None:
        return weighted_order(entries, snapshot)
    return entries


def compute_queue_positions(*, order: str, snapshot: ClusterSnapshot | None = None,
                            shares: Mapping[int, DecayedShare] | None = None) -> dict[int, tuple[int, int]]:
    """Task id → (its 1-based position, the length of its GPU type's queue). `shares`: the cycle's decayed
    shares, when it read them (else they are read here)."""
    entries, facts = _pending_entries()
    by_type: dict[str, list[QueueEntry]] = defaultdict(list)
    for entry in ordered(entries, order=order, snapshot=snapshot, shares=shares):
        by_type[facts[entry.key][0]].append(entry)
    positions = {}
    for queue in by_type.values():
        for place, entry in enumerate(queue, start=1):
            for task_id in facts[entry.key][1]:
                positions[task_id] = (place, len(queue))
    return positions


class PublicationPace:
    """When a cycle publishes the positions: every cycle while the last publication counted few pending tasks,
    else once it is PACING times its cost old."""

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._next_at = 0.0

    def due(self) -> bool:
        return self._clock() >= self._next_at

    def published(self, *, tasks: int, seconds: float) -> None:
        self._next_at = self._clock() + PACING * seconds if tasks > EVERY_CYCLE_UP_TO else 0.0


def publish_queue_positions(positions: dict[int, tuple[int, int]]) -> None:
    """Replaces the published positions at once: a reader sees the last cycle's or this one's, never a mix."""
    pipe = immediate_queue.connection().pipeline(transaction=True)
    pipe.delete(POSITIONS_KEY)
    if positions:
        pipe.hset(POSITIONS_KEY, mapping={task_id: f"{place}/{length}" for task_id, (place, length)
                                          in positions.items()})
    pipe.execute()


def queue_positions(task_ids: Iterable[int]) -> dict[int, tuple[int, int]]:
    """The positions the last cycle published for `task_ids` (a task it did not see has none)."""
    task_ids = list(task_ids)
    if not task_ids:
        return {}
    try:
        values = immediate_queue.connection().hmget(POSITIONS_KEY, task_ids)
    except Exception:
        logger.warning("queue positions unavailable: Redis did not answer", exc_info=True)
        return {}
    found = {}
    for task_id, value in zip(task_ids, values):
        if value:
            place, length = (value.decode() if isinstance(value, bytes) else value).split("/")
            found[task_id] = (int(place), int(length))
    return found
