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

The turn lives exactly as long as the session that took it. When that session ends under a cycle (a PostgreSQL
restart, a terminated backend), PostgreSQL hands the turn to a standby at once, while the cycle only learns of it at
its next statement — and Django would then open a new session of its own accord (it drops a connection whose
rollback failed, and reconnects at the next query). So the thread in its turn may open no new session: that raises
`TurnLost`, the cycle ends there, and the instance queues for the turn again at its next tick (docs/operations.md).

`HETEROFLOW_CONCURRENT_CYCLES=true` lets cycles run at once again (the bind's compare-and-swap keeps that
correct; the concurrency tests use it).
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, OperationalError, connection, connections, transaction
from django.db.backends.signals import connection_created

CYCLE_LOCK_KEY = 0x4846_4359  # "HFCY"


class TurnLost(BaseException):
    """The session holding this instance's turn ended: nothing more of the cycle may run. Not an Exception: the
    cycle's per-task isolation (an unexpected error is that task's attempt) must not turn it into attempts and
    carry on; `run_cycle` ends the cycle on it."""


_in_turn = threading.local()


def _refuse_new_session(sender, connection, **kwargs) -> None:
    if getattr(_in_turn, "wrapper", None) is not connection:  # another connection object opens as it likes
        return
    connection.close()  # closed, so that every later statement of the turn asks again, and is refused again
    raise TurnLost("the database session holding the scheduler's turn ended")


connection_created.connect(_refuse_new_session, dispatch_uid="heteroflow-cycle-turn-session")


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
    _in_turn.wrapper = connections[DEFAULT_DB_ALIAS]  # this thread's: the one whose session holds the lock
    lost = False
    try:
        yield True
    except TurnLost:
        lost = True  # the lock went with its session: nothing to unlock, and no session to unlock it on
        raise
    finally:
        _in_turn.wrapper = None
        if not lost:
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
