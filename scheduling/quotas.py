"""Tenant GPU quotas (SPEC §1): a tenant's active tasks hold at most `gpu_quota` whole cards.

A cycle loads the usage once (`QuotaUsage.load`), asks `check_admission` before placing each task and calls
`record_bind` after each successful bind, so several tasks of one tenant in one cycle cannot overshoot together.
Across scheduler instances the same rule is enforced at bind by `lock_and_check_quota`, under the tenant's row lock.
"""

from dataclasses import dataclass, field

from django.db.models import Sum

from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.status import Code, Status
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task
from tenants.models import Tenant

NAME = "quota"


class QuotaExceededError(Exception):
    """Raised at bind when the live usage leaves no room; bind rolls back and records reasons.QUOTA_EXCEEDED."""


def tenant_gpu_usage() -> dict[int, int]:
    """Whole GPUs held by each tenant's active tasks, in one query (tenants holding none are absent)."""
    rows = (
        Task.objects.filter(status__in=ACTIVE_STATES, gpu_required__gt=0)
        .values("tenant_id")
        .annotate(used=Sum("gpu_required"))
        .order_by()
    )
    return {row["tenant_id"]: row["used"] for row in rows}


def quota_message(*, used: int, quota: int, asked: int) -> str:
    return f"quota exceeded: used {used} / quota {quota}, asked {asked}"


@dataclass
class QuotaUsage:
    """Quotas and usage as one cycle sees them; `record_bind` keeps the usage current between binds."""

    quotas: dict[int, int] = field(default_factory=dict)
    used: dict[int, int] = field(default_factory=dict)

    @classmethod
    def load(cls) -> "QuotaUsage":
        quotas = dict(Tenant.objects.filter(gpu_quota__isnull=False).values_list("id", "gpu_quota"))
        return cls(quotas=quotas, used=tenant_gpu_usage())

    def record_bind(self, task: TaskInfo) -> None:
        self.used[task.tenant_id] = self.used.get(task.tenant_id, 0) + task.gpu_required

    def forget_bind(self, task: TaskInfo) -> None:
        """Take back a `record_bind` whose bind did not happen."""
        self.used[task.tenant_id] = self.used.get(task.tenant_id, 0) - task.gpu_required


def check_admission(task: TaskInfo, usage: QuotaUsage) -> Status | None:
    """None when the task's tenant has room for it; otherwise an unresolvable status whose reason is the quota line.

    Unresolvable because preempting other tenants' work frees nothing of this tenant's quota (SPEC §9).
    """
    quota = usage.quotas.get(task.tenant_id)
    if quota is None or task.gpu_required == 0:
        return None
    used = usage.used.get(task.tenant_id, 0)
    if used + task.gpu_required <= quota:
        return None
    return Status(
        code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        reasons=(quota_message(used=used, quota=quota, asked=task.gpu_required),),
        plugin=NAME,
    )


def lock_and_check_quota(*, task_id: int, tenant_id: int, gpu_required: int) -> None:
    """The live quota check of bind; call inside the bind transaction, before its CAS commits.

    Locking the tenant row serialises the binds of one tenant across scheduler instances, so the usage read after
    the lock includes every bind that committed before ours. Raises QuotaExceededError when the task does not fit.
    """
    if gpu_required == 0:
        return
    quota = Tenant.objects.select_for_update().filter(id=tenant_id).values_list("gpu_quota", flat=True).first()
    if quota is None:
        return
    used = (
        Task.objects.filter(tenant_id=tenant_id, status__in=ACTIVE_STATES)
        .exclude(id=task_id)
        .aggregate(used=Sum("gpu_required"))["used"]
        or 0
    )
    if used + gpu_required > quota:
        raise QuotaExceededError(quota_message(used=used, quota=quota, asked=gpu_required))
