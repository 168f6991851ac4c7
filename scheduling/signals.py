from django.dispatch import Signal

# Sent after the commit of a won transition, with task_id, tenant_id, from_status, to_status, reason.
task_transitioned = Signal()

# Sent after the commit of a scheduling cycle, with cycle_id, considered, bound, failed, preempting, duration_ms.
cycle_completed = Signal()

# Sent inside the transaction of won transitions of group members, with group_ids (each once), to_status and
# derive_group_status: the groups' own rules follow their members (scheduling/groups/receivers.py). The writers of
# task state are below groups and name none of them.
group_members_moved = Signal()

# Sent after the commit of a batch of a task's output, with task_id and text (the batch, decoded).
task_log_appended = Signal()
