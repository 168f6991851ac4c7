"""Task output shipped by node agents (design §16.4), kept in one `scheduling_tasklog` row per task.

Each task keeps the last TASK_LOG_MAX_BYTES (1 MiB) of its output; older bytes are dropped from the front as new
ones arrive. Why bounded and why here: a tenant needs the recent output of a task (the error it died with, how far
training got), and the control plane must not grow without limit when a task prints for weeks; a fixed cap per
task bounds the table by the number of tasks kept. PostgreSQL is the one store every web process shares, so a log
appended through one process is read and followed through any other.

An append is one statement (INSERT … ON CONFLICT DO UPDATE, which takes the row's lock), so concurrent batches of
one task are appended one after the other, never lost, and the trim happens in the same statement.
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
INSERT INTO scheduling_tasklog (task_id, content, dropped_bytes, updated_at)
VALUES (%(task_id)s,
        substring(%(data)s::bytea FROM greatest(1, length(%(data)s::bytea) - %(cap)s + 1)),
        greatest(0, length(%(data)s::bytea) - %(cap)s),
        now())
ON CONFLICT (task_id) DO UPDATE SET
    content = substring(scheduling_tasklog.content || EXCLUDED.content
                        FROM greatest(1, length(scheduling_tasklog.content) + length(EXCLUDED.content) - %(cap)s + 1)),
    dropped_bytes = scheduling_tasklog.dropped_bytes + EXCLUDED.dropped_bytes
                    + greatest(0, length(scheduling_tasklog.content) + length(EXCLUDED.content) - %(cap)s),
    updated_at = now()
RETURNING dropped_bytes + length(content)
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
            cursor.execute(_APPEND, {"task_id": task_id, "data": data, "cap": TASK_LOG_MAX_BYTES})
            (end_offset,) = cursor.fetchone()
        appended = AppendedLog(task_id=task_id, tenant_id=tenant_id, end_offset=end_offset, size=len(data))
        text = data.decode("utf-8", errors="replace")
        transaction.on_commit(lambda: task_log_appended.send(sender=Task, task_id=task_id, text=text))
    return appended

