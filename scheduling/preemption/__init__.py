"""Preemption (design §9): evict lower-priority, preemptible work so that a more important task can run.

The `preempt` plugin's PostFilter decides when it applies and acts through `attempt.PreemptionHandle`, which the
cycle lends it; `planner` chooses the victims (pure, over the snapshot), `execute` marks them `preempting`,
`scheduling.preemption.settle.settle_preempted` returns them to the queue once their container is gone, and
`watchdog.preemption_watchdog` settles those whose stop is never confirmed.
"""
