"""The scheduling queue (design §15.1), kube-scheduler's activeQ / backoffQ / unschedulable design kept in PostgreSQL
so that every scheduler process shares it.

Pending work — single tasks and training gangs alike — is ordered by priority descending (a gang by its highest
member priority), then creation time, then id (`entries.take_active`). A cycle takes the first CYCLE_LIMIT *active*
entries. Work whose attempt fails is parked (`services.queue_park`): `Task.parked_until` is set to a backoff of 1 s
doubling to 60 s with `Task.queue_backoff`, and it is active again once that passes — or at once when something
that could make it fit happens (`services.queue_activate`: cards freed, a node joins, comes online or changes, the
plugin configuration or a tenant changes). A task that started a preemption is nominated on its node
(`nomination`): the cards being freed there are held for it, not given to lower-priority work meanwhile.
"""
