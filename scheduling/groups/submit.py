"""A user's group submission, validated by the API or the group form, becomes a group of the tenant it acts for."""

from scheduling.fair_share.priority import priority_within_ceiling
from scheduling.groups.services import task_group_create
from scheduling.models import TaskGroup
from scheduling.services.task_submit import submitting_tenant


def task_group_submit(*, user, fields: dict) -> TaskGroup:
    """Create the group from a validated submission (the fields of `TaskGroupInput`); raises DomainError naming the
    field."""
    fields = dict(fields)
    tenant = submitting_tenant(user=user, tenant_id=fields.pop("tenant"))
    fields["priority"] = priority_within_ceiling(tenant=tenant, priority=fields["priority"])
    for nested in ("window", "readiness", "spread", "autoscale"):
        if fields.get(nested) is not None:
            fields[nested] = dict(fields[nested])
    return task_group_create(tenant=tenant, **fields)
