"""Reading the kept tail of a task's output (design §16.4; written by `scheduling.services.task_logs` as a log row and
its chunks)."""

from dataclasses import dataclass

from django.db import connection


# The kept chunks from `offset` (or the first kept byte) on, the first one cut where the slice starts.
_SLICE = """
SELECT coalesce((SELECT string_agg(substring(c.content FROM (start.at - c.start_offset + 1)::int), ''::bytea
                                   ORDER BY c.start_offset)
                   FROM scheduling_tasklogchunk c
                  WHERE c.task_id = l.task_id AND c.start_offset + length(c.content) > start.at), ''::bytea),
       l.dropped_bytes, l.end_offset
  FROM scheduling_tasklog l, LATERAL (SELECT greatest(%(offset)s, l.dropped_bytes) AS at) AS start
 WHERE l.task_id = %(task_id)s
"""


@dataclass(frozen=True)
class LogSlice:
    text: str
    # The offset just after the slice's last byte: where a follower asks from next time.
    end_offset: int
    # How many bytes of the task's output are no longer kept (the oldest, beyond the 1 MiB cap).
    dropped_bytes: int


def task_log_slice(*, task_id: int, offset: int = 0, tail_lines: int | None = None) -> LogSlice:
    """The output from byte `offset` of the task's whole output (or from the oldest byte kept, if that is later)
    to its end; with `tail_lines`, only that many last lines of it. Only the bytes past `offset` leave the
    database, so a follower polling with its last `end_offset` reads only what is new."""
    with connection.cursor() as cursor:
        cursor.execute(_SLICE, {"task_id": task_id, "offset": offset})
        row = cursor.fetchone()
    if row is None:
        return LogSlice(text="", end_offset=0, dropped_bytes=0)
    data, dropped_bytes, end_offset = bytes(row[0]), row[1], row[2]
    if tail_lines is not None:
        data = last_lines(data, tail_lines)
    return LogSlice(text=data.decode("utf-8", errors="replace"), end_offset=end_offset, dropped_bytes=dropped_bytes)


def last_lines(data: bytes, count: int) -> bytes:
    """The last `count` lines of `data` (a final line without its newline counts as a line)."""
    body = data[:-1] if data.endswith(b"\n") else data
    cut = len(body)
    for _ in range(count):
        cut = body.rfind(b"\n", 0, cut)
        if cut < 0:
            return data
    return data[cut + 1:]
