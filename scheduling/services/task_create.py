import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction

from heteroflow_site.errors import Conflict, NotAllowed, TooManyPending
from scheduling import lifecycle
from scheduling.queue import immediate_queue
from scheduling.framework.snapshot import is_fractional
from scheduling.models import Task, TaskGroup, TaskType
from scheduling.plugins import tell_tasks_created
from tenants.models import Tenant

logger = logging.getLogger(__name__)


def task_create(
    *,
    tenant: Tenant,
    name: str,
    type: str = TaskType.BATCH,
    image: str = "",
    command: str = "",
    gpu_type: str = "",
    gpu_required: int = 0,
    gpu_memory_mb: int = 0,
    gpu_compute_percent: int | None = None,
    cpu_cores: float = 0,
    memory_mb: int = 0,
    priority: int = 50,
    preemptible: bool = False,
    labels: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    node_selector: dict[str, str] | None = None,
    deadline: datetime | None = None,
    group: TaskGroup | None = None,
    rank: int | None = None,
    group_run: int = 0,
    env: dict[str, str] | None = None,
    revision: int = 1,
    model: str = "",
) -> Task:
    """Commit a task as pending and, after commit, offer its id to the immediate queue."""
    if not tenant.is_active:
        raise Conflict(f"tenant {tenant.name!r} is inactive and cannot submit tasks", field="tenant")
    if type == TaskType.TRAINING and preemptible:
        raise NotAllowed("training tasks cannot be preemptible", field="preemptible")
    fractional = is_fractional(gpu_required, gpu_memory_mb)
    if gpu_compute_percent is not None and not fractional:
        raise NotAllowed(
            "gpu_compute_percent applies only to fractional tasks (gpu_memory_mb without gpu_required)",
            field="gpu_compute_percent",
        )
    if group is not None and group.tenant_id != tenant.id:
        raise NotAllowed("the group belongs to another tenant", field="group")
    if group is None:
        # Group members are counted once for the whole group by the group's own service.
        ensure_pending_capacity(tenant=tenant, adding=1)
    with transaction.atomic():
        task = Task.objects.create(
            tenant=tenant,
            name=name,
            type=type,
            image=image,
            command=command,
            gpu_type=gpu_type,
            gpu_required=gpu_required,
            gpu_memory_mb=gpu_memory_mb,
            gpu_compute_percent=gpu_compute_percent,
            cpu_cores=cpu_cores,
            memory_mb=memory_mb,
            priority=priority,
            preemptible=preemptible,
            labels=labels or {},
            tolerations=[dict(item) for item in tolerations or []],
            node_selector=node_selector or {},
            deadline=deadline,
            group=group,
            rank=rank,
            group_run=group_run,
            env=env or {},
            submitted_env=env or {},
            revision=revision,
            model=model,
        )
        task_id = task.id
        transaction.on_commit(lambda: _offer_to_immediate_queue(task_id))
        transaction.on_commit(lambda: tell_tasks_created([task]))
    return task


def ensure_pending_capacity(*, tenant: Tenant, adding: int) -> None:
    """Refuse work that would take the tenant past its cap of pending tasks: one tenant cannot flood the queue
    (and every cycle's snapshot) for everyone."""
    limit = settings.HETEROFLOW_MAX_PENDING_PER_TENANT
    pending = Task.objects.filter(tenant_id=tenant.id, status=lifecycle.PENDING).count()
    if pending + adding > limit:
        raise TooManyPending(f"tenant {tenant.name!r} has {pending} pending tasks; at most {limit} may wait at once",
                             field="tenant")


def _offer_to_immediate_queue(task_id: int) -> None:
    # The queue only shortens the wait; a task it cannot take is found by the next cycle anyway.
    try:
        immediate_queue.push(task_id)
    except Exception:
        logger.warning("immediate queue unavailable; task %s waits for the next cycle", task_id, exc_info=True,
                       extra={"task_id": task_id})
