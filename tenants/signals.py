from django.dispatch import Signal

# Sent inside the transaction of a change that may let a tenant's waiting work be placed — its status or quota, a
# share group — with `tenant_id` (None: every tenant) and `reason`. Scheduling activates the parked work (§15.1).
tenancy_changed = Signal()
