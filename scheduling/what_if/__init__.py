"""What-if: what the scheduler would do, computed and shown before anything happens.

A preview reads the database in one read-only transaction (`read_only.read_only_transaction`: PostgreSQL refuses any
write in it, and it takes no row lock, so a live cycle is never blocked by it), builds the scheduler's snapshot as a
cycle would and runs the production framework over copies of it (`simulation`). Nothing is bound, recorded or
evicted: `plugin_sets` previews a change of the plugin set over the head of the pending queue, `preemption_plan`
what the `preempt` PostFilter would do for one pending task now.
"""
