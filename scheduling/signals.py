from django.dispatch import Signal

# Sent after the commit of a won transition, with task_id, tenant_id, from_status, to_status, reason.
task_transitioned = Signal()
