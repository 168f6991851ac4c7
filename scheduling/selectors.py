from django.db.models import QuerySet

from heteroflow_site.permissions import is_admin
from scheduling.models import Task
from tenants.selectors import tenant_of


def tasks_visible_to(user) -> QuerySet[Task]:
    """Admins see every task; a tenant user only its tenant's; anyone else nothing."""
    tasks = Task.objects.select_related("tenant", "node", "attempt")
    if is_admin(user):
        return tasks
    tenant = tenant_of(user)
    if tenant is None:
        return tasks.none()
    return tasks.filter(tenant=tenant)
