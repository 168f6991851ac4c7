"""The production target workload: the shapes of the last `WINDOW` submitted tasks, kept in one Redis list per
database (`window_key`), so test and benchmark databases never mix their tasks into the cluster's window.

`record_shape` runs after a task's creation commits (one LPUSH + LTRIM, pipelined); `recent_workload` reads the
list at most once per `REFRESH_SECONDS` per process and returns the same `TargetWorkload` object in between, and
after a refresh that read the same shapes, so the fgd plugin's per-table caches stay valid across cycles. An unreachable Redis yields an empty workload (fgd then
scores every node alike) and is retried at the next refresh. A Redis that restarted or was flushed has lost the list:
`restore_window` (the `plugin-state` periodic job, every minute) rebuilds it from the last `WINDOW` tasks in
PostgreSQL, read by the job and handed in (plugins read no ORM), so fgd never scores alike for longer than that.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict

from scheduling.framework.snapshot import TaskInfo
from scheduling.plugins.fgd.workload import Shape, TargetWorkload

logger = logging.getLogger(__name__)

WINDOW_KEY_PREFIX = "heteroflow:fgd:recent-shapes"
WINDOW = 2000
REFRESH_SECONDS = 10.0

_cached: tuple[float, TargetWorkload] | None = None


def _connection():
    from scheduling.queue.immediate_queue import connection

    return connection()


def window_key() -> str:
    from django.conf import settings

    return f"{WINDOW_KEY_PREFIX}:{settings.DATABASES['default']['NAME']}"


def record_shape(task: TaskInfo) -> None:
    record_shapes([task])


def record_shapes(tasks: Iterable[TaskInfo]) -> None:
    """Push the tasks' shapes, oldest first, in one round trip."""
    key = window_key()
    pipe = _connection().pipeline()
    for task in tasks:
        pipe.lpush(key, json.dumps(asdict(Shape.of(task)), separators=(",", ":")))
    pipe.ltrim(key, 0, WINDOW - 1)
    pipe.execute()


def read_window() -> list[Shape]:
    """The window's shapes, newest first. Each distinct entry is parsed once: a window of 2,000 tasks holds a few
    hundred shapes at most, and parsing every entry was some 16 ms of each refresh."""
    raws = _connection().lrange(window_key(), 0, WINDOW - 1)
    shapes = {raw: Shape(**json.loads(raw)) for raw in set(raws)}
    return [shapes[raw] for raw in raws]


def restore_window(newest_tasks: Callable[[int], list[TaskInfo]]) -> str:
    """Rebuild the window from the newest `WINDOW` tasks in the database (`newest_tasks(count)`, oldest first) when
    Redis lost it; a line on what was done."""
    if _connection().exists(window_key()):
        return "recent-task window present"
    tasks = newest_tasks(WINDOW)
    if tasks:
        record_shapes(tasks)
    forget_cached()
    return f"recent-task window rebuilt from {len(tasks)} task(s)"


def clear_window() -> None:
    _connection().delete(window_key())
    forget_cached()


def recent_workload(*, now: float | None = None) -> TargetWorkload:
    global _cached
    now = time.monotonic() if now is None else now
    if _cached is not None and now - _cached[0] < REFRESH_SECONDS:
        return _cached[1]
    try:
        workload = TargetWorkload.from_shapes(read_window())
    except Exception:
        logger.warning("fgd: the recent-task window is unreadable; fgd scores nodes alike until it is back",
                       exc_info=True)
        workload = TargetWorkload((), ())
    # An unchanged window keeps its object: fgd's per-table caches are keyed by it and would otherwise be computed
    # afresh every refresh.
    if _cached is not None and workload == _cached[1]:
        workload = _cached[1]
    _cached = (now, workload)
    return workload


def forget_cached() -> None:
    """Read the window again at the next call (tests, and after clearing the window)."""
    global _cached
    _cached = None
