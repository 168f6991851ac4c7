"""Live updates: after-commit signal handlers render HTML fragments and push them to websocket groups.

Sends go through one background event loop so that a scheduling cycle binding many tasks never waits on Redis,
and a missing channel layer only costs a log line: the pages fall back to polling.

Task rows travel as ids (`_TaskRowFeed`): the committing thread only notes which task changed, a background
thread sends the changes of each COALESCE_SECONDS as one message per group, and each socket's consumer reads and
renders its rows (`task_rows_html`; htmx swaps every out-of-band row of a message).
"""

import asyncio
import logging
import os
import threading
import time
from collections import defaultdict

from channels.layers import get_channel_layer
from django.dispatch import receiver
from django.template.loader import render_to_string

from scheduling.signals import cycle_completed, task_transitioned

logger = logging.getLogger(__name__)

DIAGNOSTICS_GROUP = "diagnostics"
ALL_TASKS_GROUP = "tasks_all"
COALESCE_SECONDS = 0.1


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
    from scheduling.selectors import recent_cycles

    cycles = list(recent_cycles())
    return render_to_string("scheduling/diagnostics.html#recent-cycles", {"cycles": cycles, "oob": True})


def task_rows_html(task_ids, *, tenant_id: int | None) -> str:
    """The rows of the given tasks as they are now, for one socket: a tenant's own tasks only (`tenant_id`), or
    every task with its tenant column for staff (`tenant_id` None)."""
    from scheduling.selectors import task_rows

    tasks = task_rows(task_ids=task_ids, tenant_id=tenant_id)
    return "".join(task_row_html(task, show_tenant=tenant_id is None) for task in tasks)


class _TaskRowFeed:
    """Tasks whose row changed, sent as ids by one daemon thread every COALESCE_SECONDS: one message per tenant
    group and one for staff. The socket consumers read and render the rows, so a scheduler process spends no
    query and no template render on them (nor, with nobody watching, does anyone). A forked child starts its own
    thread with an empty feed."""

    def __init__(self):
        self._lock = threading.Lock()
        self._changed: dict[int, int] = {}
        self._wake = threading.Event()
        self._pid: int | None = None

    def add(self, task_id: int, tenant_id: int) -> None:
        with self._lock:
            if self._pid != os.getpid():
                self._changed, self._wake, self._pid = {}, threading.Event(), os.getpid()
                threading.Thread(target=self._drain, args=(self._wake,), name="live-task-rows", daemon=True).start()
            self._changed[task_id] = tenant_id
            self._wake.set()

    def _drain(self, wake: threading.Event) -> None:
        while True:
            wake.wait()
            time.sleep(COALESCE_SECONDS)
            with self._lock:
                batch, self._changed = self._changed, {}
                wake.clear()
            by_tenant: dict[int, list[int]] = defaultdict(list)
            for task_id, tenant_id in sorted(batch.items()):
                by_tenant[tenant_id].append(task_id)
            for tenant_id, task_ids in by_tenant.items():
                publish(tenant_group(tenant_id), {"type": "task.status", "task_ids": task_ids})
            publish(ALL_TASKS_GROUP, {"type": "task.status", "task_ids": sorted(batch)})


task_row_feed = _TaskRowFeed()


@receiver(task_transitioned, dispatch_uid="scheduling.web.live.task_status")
def broadcast_task_status(sender, *, task_id: int, tenant_id: int, **kwargs) -> None:
    task_row_feed.add(task_id, tenant_id)


@receiver(cycle_completed, dispatch_uid="scheduling.web.live.cycle")
def broadcast_cycle(sender, **kwargs) -> None:
    """A cycle ended: the diagnostics sockets read and render the recent cycles themselves, so the scheduler spends
    no query and no template render on pages nobody may be watching."""
    publish(DIAGNOSTICS_GROUP, {"type": "cycle.summary"})
