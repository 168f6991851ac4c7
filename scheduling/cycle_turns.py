"""One scheduling cycle at a time across every scheduler instance (the production default).

Measured (docs/scheduler-performance.md): instances that run cycles at once each build the same snapshot, pick the
same best nodes, and then lose most of a batch to the first one's commit — refused binds, nodes re-read, tasks
decided again, locks waited for — so three instances placed fewer tasks per second than one. PostgreSQL commits
one scheduler's batches well below its bind ceiling, so the cycle itself, not the database, is the bottleneck;
instances that take turns keep every cycle's decisions valid and each process's cache warm.

A cycle holds a session-level PostgreSQL advisory lock on its connection. Another instance that wants to run one
waits for it in PostgreSQL's lock queue (up to `wait` seconds, then skips: the next tick comes soon), so the instances are hot standbys of
each other: when the one holding the lock dies, its connection closes, PostgreSQL releases the lock and a waiting
instance starts its cycle at once.

`HETEROFLOW_CONCURRENT_CYCLES=true` lets cycles run at once again (the bind's compare-and-swap keeps that
correct; the concurrency tests use it).
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import OperationalError, connection, transaction

CYCLE_LOCK_KEY = 0x4846_4359  # "HFCY"


@contextmanager
def cycle_turn(*, wait: float) -> Iterator[bool]:
    """True inside the block when this instance may run its cycle now; False when another instance kept its
    turn for more than `wait` seconds."""
    if settings.SCHEDULER["concurrent_cycles"]:
        yield True
        return
    if not _lock(wait):
        yield False
        return
    try:
        yield True
    finally:
        _unlock()


def _lock(wait: float) -> bool:
    """Wait in PostgreSQL's lock queue rather than poll: a waiting instance costs no CPU and starts the moment the
    turn is released, and the queue hands turns out in the order they were asked for. The session-level lock
    outlives the short transaction that bounds the wait (`lock_timeout` applies to advisory locks too)."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('lock_timeout')")
            (usual,) = cursor.fetchone()
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{max(int(wait * 1000), 1)}ms"])
            cursor.execute("SELECT pg_advisory_lock(%s)", [CYCLE_LOCK_KEY])
            # Inside a caller's transaction (tests) a local setting would outlive this block.
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [usual])
    except OperationalError as error:
        if getattr(error.__cause__, "sqlstate", None) == "55P03":  # lock_not_available: the wait ran out
            return False
        raise
    return True


def _unlock() -> None:
    # A connection lost during the cycle took the lock with it; unlocking on its replacement is a no-op then.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s)", [CYCLE_LOCK_KEY])
