"""Previews compute at the lowest CPU priority, so that on a shared machine the live scheduler gets the CPU first.

A preview places a cycle's worth of tasks twice: as much CPU as a cycle. It runs in one long-lived worker thread
whose nice value is 19 (Linux sets nice per thread); the request waits for it. Previews take turns in it, which
suits an admin tool, and the thread's priority never leaks into the server's request threads.
"""

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
NICENESS = 19


def _lowest_priority() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
    except (AttributeError, OSError):  # not Linux, or not allowed: the preview then runs at normal priority
        pass


_worker: ThreadPoolExecutor | None = None
_starting = threading.Lock()


def _forget_worker() -> None:
    # A forked child (a test's live server, a prefork web server) inherits the executor but not its thread.
    global _worker, _starting
    _worker, _starting = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_worker)


def at_low_priority(compute: Callable[[], T]) -> T:
    """`compute()` (pure computation: no database) in the low-priority worker; its result or its exception."""
    global _worker
    with _starting:
        if _worker is None:
            _worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="what-if", initializer=_lowest_priority)
    return _worker.submit(compute).result()
