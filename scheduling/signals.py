from django.dispatch import Signal

# Sent after the commit of a won transition, with task_id, tenant_id, from_status, to_status, reason.
task_transitioned = Signal()

# Sent after the commit of a scheduling cycle, with cycle_id, considered, bound, failed, preempting, duration_ms.
cycle_completed = Signal()
