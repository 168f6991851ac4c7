"""The cyclic garbage collector around a scheduling cycle.

A cycle allocates thousands of objects per attempt while the snapshot (every node with its cards) stays alive
throughout: collections triggered meanwhile walk the snapshot, and a full one walks the whole of Django too — some
60-100 ms each at 300 nodes, more than scheduling itself at 5,000. So no collection runs while a cycle does
(`collector_paused`): what the cycle leaves in reference cycles is collected after it, as usual.

And the first cycle of a process moves what startup made (modules, Django's registries, the plugin registry) to the
collector's permanent generation, as the web process does at import (`heteroflow_site.asgi`): none of it ever
becomes garbage, so the full collections between cycles walk only what scheduling keeps. It is frozen for good — a
cycle never unfreezes (that would thaw the startup objects again).
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_startup_frozen = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic collection inside; the collector left enabled or disabled as it was found."""
    global _startup_frozen
    if not _startup_frozen:
        gc.collect()
        gc.freeze()
        _startup_frozen = True
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
