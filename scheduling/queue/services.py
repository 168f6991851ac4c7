"""Writes of the scheduling queue: park what failed, activate what an event may have made placeable.

Both are single statements with compare-and-swap conditions (the task must still be pending), so concurrent
scheduler processes and event sources need no lock beyond the rows they touch.

An event that happens while a cycle is deciding must not be lost by the cycle parking its tasks just after: every
activation first advances the `scheduling_queue_activation` sequence (non-transactional, so other sessions see it at
once); a cycle reads it before building its snapshot (`activation_mark`) and `queue_park` leaves the tasks active
when it moved meanwhile. Activation runs in the event's own transaction and once more after it commits, which
covers tasks a cycle parked between the two.
"""

import logging
from collections.abc import Iterable

from django.db import connection, transaction

from scheduling import lifecycle
from scheduling.models import Task

logger = logging.getLogger(__name__)

ACTIVATION_SEQUENCE = "scheduling_queue_activation"
BACKOFF_INITIAL_SECONDS = 1
BACKOFF_MAX_SECONDS = 60
_TASKS = Task._meta.db_table

_MARK = f"SELECT coalesce(pg_sequence_last_value('{ACTIVATION_SEQUENCE}'), 0)"

_PARK = f"""
UPDATE {_TASKS}
   SET queue_backoff = least(queue_backoff + 1, 32767),
       parked_until = CASE WHEN ({_MARK}) = %(mark)s
                           THEN clock_timestamp() + least(%(initial)s * power(2, least(queue_backoff, 30)), %(max)s)
                                                    * interval '1 second'
                      END
 WHERE (id = ANY(%(task_ids)s) OR group_id = ANY(%(group_ids)s)) AND status = %(pending)s
"""

_ACTIVATE = f"""
UPDATE {_TASKS} SET parked_until = NULL
 WHERE status = %(pending)s AND parked_until > clock_timestamp()
   AND (%(gpu_types)s::text[] IS NULL OR gpu_type = '' OR gpu_type = ANY(%(gpu_types)s::text[]))
   AND (%(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s::bigint)
   AND (%(task_ids)s::bigint[] IS NULL OR id = ANY(%(task_ids)s::bigint[]))
"""


def activation_mark() -> int:
    """The activation sequence's current value; read by a cycle before its snapshot, handed to `queue_park`."""
    with connection.cursor() as cursor:
        cursor.execute(_MARK)
        return int(cursor.fetchone()[0])


def queue_park(*, task_ids: Iterable[int] = (), group_ids: Iterable[int] = (), mark: int) -> int:
    """Park the pending tasks `task_ids` and the pending members of the gangs `group_ids` after a failed attempt:
    backoff 1 s doubling to 60 s. Left active instead when an activation happened since `mark`. Returns how many
    tasks were parked or left active."""
    task_ids, group_ids = sorted(set(task_ids)), sorted(set(group_ids))
    if not task_ids and not group_ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(_PARK, {"task_ids": task_ids, "group_ids": group_ids, "pending": lifecycle.PENDING,
                               "mark": mark, "initial": BACKOFF_INITIAL_SECONDS, "max": BACKOFF_MAX_SECONDS})
        return cursor.rowcount


def queue_activate(*, reason: str, gpu_types: Iterable[str] | None = None, tenant_id: int | None = None,
                   task_ids: Iterable[int] | None = None) -> None:
    """Something happened that could make parked work fit (`reason`, for the log): activate it at once.

    `gpu_types` narrows it to tasks asking for one of those types (or for none), `tenant_id` to one tenant's tasks,
    `task_ids` to those tasks. Call it inside the transaction that makes the change; it runs again right after
    that commits.
    """
    params = {"pending": lifecycle.PENDING, "tenant_id": tenant_id,
              "gpu_types": sorted(set(gpu_types)) if gpu_types is not None else None,
              "task_ids": sorted(set(task_ids)) if task_ids is not None else None}
    activated = _activate(params)
    if activated:
        logger.debug("queue: %s activated %s parked task(s)", reason, activated)
    if connection.in_atomic_block:
        transaction.on_commit(lambda: _activate(params))


def _activate(params: dict) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT nextval('{ACTIVATION_SEQUENCE}')")
        cursor.execute(_ACTIVATE, params)
        return cursor.rowcount
