"""A user's submission, validated by the API or the job form, becomes a task of the tenant it acts for."""

from heteroflow_site.errors import NotAllowed, NotFoundReference
from heteroflow_site.permissions import is_admin
from scheduling.fair_share.priority import priority_within_ceiling
from scheduling.models import Task, TaskGroup
from scheduling.services.task_create import task_create
from tenants.models import Tenant
from tenants.selectors import tenant_of


def submitting_tenant(*, user, tenant_id: int | None) -> Tenant:
    """Admins name the tenant; a tenant user always submits for its own and may not name one."""
    if is_admin(user):
        if tenant_id is None:
            raise NotAllowed("admins must name the tenant the task belongs to", field="tenant")
        tenant = Tenant.objects.filter(id=tenant_id).first()
        if tenant is None:
            raise NotFoundReference(f"no tenant with id {tenant_id}", field="tenant")
        return tenant
    if tenant_id is not None:
        raise NotAllowed("only admins may choose the tenant", field="tenant")
    tenant = tenant_of(user)
    if tenant is None:
        raise NotAllowed("this user belongs to no tenant", field="tenant")
    return tenant


def task_submit(*, user, fields: dict) -> Task:
    """Create the task from a validated submission (the fields of `TaskInput`); raises DomainError naming the field."""
    fields = dict(fields)
    tenant = submitting_tenant(user=user, tenant_id=fields.pop("tenant"))
    fields["priority"] = priority_within_ceiling(tenant=tenant, priority=fields["priority"])
    group_id = fields.pop("group")
    group = None
    if group_id is not None:
        group = TaskGroup.objects.filter(id=group_id, tenant=tenant).first()
        if group is None:
            raise NotFoundReference(f"no task group with id {group_id}", field="group")
    return task_create(tenant=tenant, group=group, **fields)
