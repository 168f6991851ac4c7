"""Task output shipped by node agents (design §16.4), kept per task as a `scheduling_tasklog` row (where the output
ends and how much of its front was dropped) and one `scheduling_tasklogchunk` row per batch.

Each task keeps the last TASK_LOG_MAX_BYTES (1 MiB) of its output; older bytes are dropped from the front as new
ones arrive. Why bounded and why here: a tenant needs the recent output of a task (the error it died with, how far
training got), and the control plane must not grow without limit when a task prints for weeks; a fixed cap per
task bounds the table by the number of tasks kept, and the retention job bounds the tasks kept and each tenant's
log bytes (design §17.4). PostgreSQL is the one store every web process shares, so a log appended through one
process is read and followed through any other.

An append writes its batch as a chunk and moves the small log row's offsets: it does not rewrite the kept tail (a
single-row log rewrote its whole kept MiB, some 1.1 MB of WAL per 64 KiB batch). The log row's upsert takes the
row's lock first, so concurrent batches of one task get consecutive offsets, never lost; chunks wholly before the
kept tail are deleted in the same transaction (the first kept chunk may start before it: readers cut it).
"""

from dataclasses import dataclass

from django.db import connection, transaction

from nodes.models import Node
from scheduling.models import Task
from scheduling.signals import task_log_appended

TASK_LOG_MAX_BYTES = 1024 * 1024
# One batch's body at most: an agent ships its output in batches of up to 64 KiB (nodes/agent/log_shipping.py).
LOG_BATCH_MAX_BYTES = 256 * 1024

_APPEND = """
WITH moved AS (
    INSERT INTO scheduling_tasklog (task_id, dropped_bytes, end_offset, updated_at)
    VALUES (%(task_id)s, greatest(0, %(size)s - %(cap)s), %(size)s, now())
    ON CONFLICT (task_id) DO UPDATE SET
        end_offset = scheduling_tasklog.end_offset + %(size)s,
        dropped_bytes = greatest(scheduling_tasklog.dropped_bytes, scheduling_tasklog.end_offset + %(size)s - %(cap)s),
        updated_at = now()
    RETURNING end_offset, dropped_bytes
), kept AS (
    -- Of a batch bigger than the cap, only its end.
    INSERT INTO scheduling_tasklogchunk (task_id, start_offset, content)
    SELECT %(task_id)s, greatest(end_offset - %(size)s, dropped_bytes),
           substring(%(data)s::bytea FROM greatest(1, %(size)s - (end_offset - dropped_bytes) + 1)::int)
      FROM moved
     WHERE %(size)s > 0
), dropped AS (
    DELETE FROM scheduling_tasklogchunk c USING moved
     WHERE c.task_id = %(task_id)s AND c.start_offset + length(c.content) <= moved.dropped_bytes
)
SELECT end_offset FROM moved
"""


class NotPlacedOnThisNode(Exception):
    """The task does not exist or is not placed on the calling node: its output is not this node's to ship."""


@dataclass(frozen=True)
class AppendedLog:
    task_id: int
    tenant_id: int
    # The offset of the output's end after this batch (the batch is the `size` bytes before it).
    end_offset: int
    size: int


def task_log_append(*, node: Node, task_id: int, data: bytes) -> AppendedLog:
    """Append a batch of the task's output; the oldest bytes beyond TASK_LOG_MAX_BYTES are dropped.

    Only the node the task is placed on may append (a finished task keeps its node, so a final flush after the
    task ended is accepted). Followers are told after the commit (`task_log_appended`).
    """
    with transaction.atomic():
        tenant_id = Task.objects.filter(id=task_id, node=node).values_list("tenant_id", flat=True).first()
        if tenant_id is None:
            raise NotPlacedOnThisNode(task_id)
        with connection.cursor() as cursor:
            cursor.execute(_APPEND, {"task_id": task_id, "data": data, "size": len(data), "cap": TASK_LOG_MAX_BYTES})
            (end_offset,) = cursor.fetchone()
        appended = AppendedLog(task_id=task_id, tenant_id=tenant_id, end_offset=end_offset, size=len(data))
        text = data.decode("utf-8", errors="replace")
        transaction.on_commit(lambda: task_log_appended.send(sender=Task, task_id=task_id, text=text))
    return appended

