import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction

from heteroflow_site.errors import Conflict, DomainError, NotAllowed, TooManyPending
from scheduling import lifecycle
from scheduling.queue import immediate_queue
from scheduling.framework.snapshot import is_fractional
from scheduling.models import (
    DEFAULT_GRACE_SECONDS,
    TIMEOUT_MAX_SECONDS,
    TIMEOUT_MIN_SECONDS,
    Task,
    TaskGroup,
    TaskType,
)
from scheduling.plugins import tell_tasks_created
from tenants.models import Tenant

logger = logging.getLogger(__name__)


class TypeDefault:
    """Type of BY_TYPE: a timeout left out takes its type's default, whereas None means none at all."""

    def __repr__(self) -> str:
        return "BY_TYPE"


BY_TYPE = TypeDefault()


def timeout_for(*, type: str, timeout_seconds: int | None | TypeDefault) -> int | None:
    """design §17.1: `default_task_timeout` is the default of batch and training tasks (and training groups) only;
    an inference replica without one runs until stopped. The setting is kept within the bounds a task may set."""
    if not isinstance(timeout_seconds, TypeDefault):
        return timeout_seconds
    if type == TaskType.INFERENCE:
        return None
    return min(max(settings.SCHEDULER["default_task_timeout"], TIMEOUT_MIN_SECONDS), TIMEOUT_MAX_SECONDS)


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
    replica: int | None = None,
    group_run: int = 0,
    env: dict[str, str] | None = None,
    timeout_seconds: int | None | TypeDefault = BY_TYPE,
    termination_grace_seconds: int = DEFAULT_GRACE_SECONDS,
    revision: int = 1,
    model: str = "",
) -> Task:
    """Commit a task as pending and, after commit, offer its id to the immediate queue."""
    if not tenant.is_active:
        raise Conflict(f"tenant {tenant.name!r} is inactive and cannot submit tasks", field="tenant")
    if type == TaskType.TRAINING and preemptible:
        # design §17.1: a 400 (the published schema refuses the pair too), as the seed has it.
        raise DomainError("training tasks cannot be preemptible", field="preemptible")
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
            replica=replica,
            group_run=group_run,
            env=env or {},
            timeout_seconds=timeout_for(type=type, timeout_seconds=timeout_seconds),
            termination_grace_seconds=termination_grace_seconds,
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
