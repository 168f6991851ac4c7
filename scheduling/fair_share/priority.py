"""The priority ceiling (design §16.2): a tenant's tasks ask for at most its `max_priority`."""

from heteroflow_site.errors import NotAllowed
from tenants.models import Tenant

DEFAULT_PRIORITY = 50


def priority_within_ceiling(*, tenant: Tenant, priority: int | None) -> int:
    """The priority a submission gets: the one it names, refused above the tenant's ceiling (a 400 naming
    `priority`), else min(50, ceiling)."""
    if priority is None:
        return min(DEFAULT_PRIORITY, tenant.max_priority)
    if priority > tenant.max_priority:
        raise NotAllowed(f"priority {priority} is above the tenant's max_priority {tenant.max_priority}",
                          field="priority")
    return priority
