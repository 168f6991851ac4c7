"""Live updates: after-commit signal handlers render HTML fragments and push them to websocket groups.

Sends go through one background event loop so that a scheduling cycle binding many tasks never waits on Redis,
and a missing channel layer only costs a log line: the pages fall back to polling.
"""

import asyncio
import logging
import os
import threading

from channels.layers import get_channel_layer
from django.dispatch import receiver
from django.template.loader import render_to_string

from scheduling.signals import cycle_completed, task_transitioned

logger = logging.getLogger(__name__)

DIAGNOSTICS_GROUP = "diagnostics"
ALL_TASKS_GROUP = "tasks_all"
RECENT_CYCLES = 10


def tenant_group(tenant_id: int) -> str:
    return f"tenant_{tenant_id}"


class _Publisher:
    """A daemon thread owning one asyncio loop, so the channel layer keeps its Redis connections between sends.

    A forked child (Celery prefork, a test server) inherits the loop object but not its thread: it starts its own.
    """

    def __init__(self):
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed() or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="live-publisher", daemon=True).start()
                self._loop, self._pid = loop, os.getpid()
            return self._loop

    def publish(self, group: str, message: dict) -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), self._running_loop())
        future.add_done_callback(_log_failure)


def _log_failure(future) -> None:
    error = future.exception()
    if error is not None:
        logger.warning("live update not delivered: %s", error)


publisher = _Publisher()


def publish(group: str, message: dict) -> None:
    try:
        publisher.publish(group, message)
    except Exception:  # a broken channel layer must never break the write that triggered the update
        logger.warning("live update not sent", exc_info=True)


def task_row_html(task, *, show_tenant: bool) -> str:
    return render_to_string("scheduling/tasks.html#task-row", {"task": task, "show_tenant": show_tenant, "oob": True})


def recent_cycles_html() -> str:
    from scheduling.models import CycleRecord

    cycles = list(CycleRecord.objects.all()[:RECENT_CYCLES])
    return render_to_string("scheduling/diagnostics.html#recent-cycles", {"cycles": cycles, "oob": True})


@receiver(task_transitioned, dispatch_uid="scheduling.live.task_status")
def broadcast_task_status(sender, *, task_id: int, tenant_id: int, **kwargs) -> None:
    from scheduling.models import Task

    try:
        task = Task.objects.select_related("tenant", "node").get(id=task_id)
        publish(tenant_group(tenant_id), {"type": "task.status", "html": task_row_html(task, show_tenant=False)})
        publish(ALL_TASKS_GROUP, {"type": "task.status", "html": task_row_html(task, show_tenant=True)})
    except Exception:
        logger.warning("task %s status not broadcast", task_id, exc_info=True)


@receiver(cycle_completed, dispatch_uid="scheduling.live.cycle")
def broadcast_cycle(sender, **kwargs) -> None:
    try:
        publish(DIAGNOSTICS_GROUP, {"type": "cycle.summary", "html": recent_cycles_html()})
    except Exception:
        logger.warning("cycle summary not broadcast", exc_info=True)
