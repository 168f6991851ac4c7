"""The cyclic garbage collector around a scheduling cycle.

A cycle allocates thousands of objects per attempt while the snapshot (every node with its cards) stays alive
throughout: collections triggered meanwhile walk the snapshot, and a full one walks the whole of Django too — some
60-100 ms each at 300 nodes, more than scheduling itself at 5,000. So no collection runs while a cycle does
(`collector_paused`): what the cycle leaves in reference cycles is collected after it, as usual.

And what startup made (modules, Django's registries, the plugin registry) goes to the collector's permanent
generation, as the web process does at import (`heteroflow_site.asgi`): none of it ever becomes garbage, so the
full collections between cycles walk only what scheduling keeps. A scheduler process does so once it has started
(`freeze_startup`: `run_scheduler`, the benchmark's instances, each Celery worker process, where production runs the
cycles), any other process at its first cycle. It is frozen for good — a cycle never unfreezes (that would thaw the
startup objects again).
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from celery.signals import worker_process_init

_startup_frozen = False


def freeze_startup() -> None:
    """Collect once and move everything alive to the permanent generation, the first time only."""
    global _startup_frozen
    if not _startup_frozen:
        gc.collect()
        gc.freeze()
        _startup_frozen = True


@worker_process_init.connect(dispatch_uid="scheduling.cycle.collector.freeze_startup")
def _freeze_worker_process(**kwargs) -> None:
    freeze_startup()


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic collection inside; the collector left enabled or disabled as it was found."""
    freeze_startup()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
