"""Preemption (SPEC §9): evict lower-priority, preemptible work so that a more important task can run.

`attempt.try_preemption` is the cycle's entry point, `planner` chooses the victims (pure, over the snapshot),
`execute` marks them `preempting`, `settle.settle_preempted` returns them to the queue once their container is
gone, and `watchdog.preemption_watchdog` settles those whose stop is never confirmed.
"""

from scheduling.preemption.attempt import try_preemption

__all__ = ["try_preemption"]
