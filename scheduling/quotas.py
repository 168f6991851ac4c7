"""Tenant GPU quotas (design §1): a tenant's active tasks hold at most `gpu_quota` whole cards.

A cycle loads quotas and usage once into its snapshot (`load_tenant_quotas`); the framework's quota PreFilter
admits each task by them and every bind of the cycle updates the usage, so several tasks of one tenant in one
cycle cannot overshoot together. Across scheduler instances the bind pipeline applies the same rule again under
the tenant's row lock (`scheduling.bind`).
"""

from collections.abc import Iterable

from django.db.models import QuerySet, Sum

from scheduling.framework.snapshot import TenantQuotas
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task
from tenants.models import Tenant


def tenant_gpu_usage_rows(tenant_ids: Iterable[int] | None = None) -> QuerySet:
    """THE tenant-usage reader: (tenant id, whole GPUs its active tasks hold) rows, tenants holding none absent;
    only `tenant_ids` when given. The bind's locked read runs this same query in its pipeline."""
    rows = Task.objects.filter(status__in=ACTIVE_STATES, gpu_required__gt=0)
    if tenant_ids is not None:
        rows = rows.filter(tenant_id__in=list(tenant_ids))
    return rows.values("tenant_id").annotate(used=Sum("gpu_required")).order_by().values_list("tenant_id", "used")


def tenant_gpu_usage(tenant_ids: Iterable[int] | None = None) -> dict[int, int]:
    """Whole GPUs held by each tenant's active tasks, in one query (tenants holding none are absent)."""
    return {tenant_id: int(used) for tenant_id, used in tenant_gpu_usage_rows(tenant_ids)}


def load_tenant_quotas() -> TenantQuotas:
    quotas = dict(Tenant.objects.filter(gpu_quota__isnull=False).values_list("id", "gpu_quota"))
    return TenantQuotas(quotas=quotas, used=tenant_gpu_usage())


def inactive_tenant_ids() -> frozenset[int]:
    """Tenants whose pending tasks the scheduler holds (design §15.6)."""
    return frozenset(Tenant.objects.filter(status=Tenant.Status.INACTIVE).values_list("id", flat=True))
