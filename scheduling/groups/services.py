from django.db import transaction

from heteroflow_site.errors import Conflict, DomainError, NotAllowed
from heteroflow_site.validation import REPLICAS_MAX
from nodes.models import Node
from scheduling.groups.replicas import create_member, create_replica
from scheduling.groups.windows import validate_window
from scheduling.models import DEFAULT_GRACE_SECONDS, GroupRevision, Parallelism, TaskGroup, TaskType
from scheduling.services.task_create import BY_TYPE, TypeDefault, ensure_pending_capacity, timeout_for
from tenants.models import Tenant


def task_group_create(
    *,
    tenant: Tenant,
    name: str,
    type: str,
    world_size: int,
    gpus_per_worker: int,
    parallelism: str = Parallelism.DATA,
    gpu_type: str = "",
    replicas: int | None = None,
    window: dict | None = None,
    image: str = "",
    command: str = "",
    priority: int = 50,
    max_restarts: int = 3,
    tolerations: list[dict[str, str]] | None = None,
    node_selector: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    timeout_seconds: int | None | TypeDefault = BY_TYPE,
    termination_grace_seconds: int = DEFAULT_GRACE_SECONDS,
    env: dict[str, str] | None = None,
    max_surge: int = 1,
    max_unavailable: int = 0,
    ready_timeout_seconds: int = 600,
    readiness: dict | None = None,
    model: str = "",
    min_available: int | None = None,
    spread: dict | None = None,
    autoscale: dict | None = None,
    nodes_per_replica: int = 1,
) -> TaskGroup:
    """Create a group and its member tasks, all pending, in one transaction: a training gang's `world_size` members,
    or an inference group's replicas, each `nodes_per_replica` members (design §17.1)."""
    if not tenant.is_active:
        raise Conflict(f"tenant {tenant.name!r} is inactive and cannot submit tasks", field="tenant")
    if type == TaskType.TRAINING and (replicas is not None or window is not None):
        # A 400, as the published schema says (design §17.1).
        raise DomainError("replicas and window apply to inference groups only",
                          field="replicas" if replicas is not None else "window")
    if type == TaskType.INFERENCE and (replicas if replicas is not None else world_size) > REPLICAS_MAX:
        raise NotAllowed(f"an inference group has at most {REPLICAS_MAX} replicas",
                          field="replicas" if replicas is not None else "world_size")
    service_fields = {"max_surge": max_surge != 1, "max_unavailable": max_unavailable != 0,
                      "ready_timeout_seconds": ready_timeout_seconds != 600, "readiness": readiness is not None,
                      "model": bool(model), "min_available": min_available is not None,
                      "spread": spread is not None, "autoscale": autoscale is not None,
                      "nodes_per_replica": nodes_per_replica != 1}
    if type == TaskType.TRAINING and (named := next((name for name, given in service_fields.items() if given), None)):
        raise NotAllowed(f"{named} applies to inference groups only", field=named)
    if nodes_per_replica < 1 or nodes_per_replica > 1 and gpus_per_worker == 0:
        raise DomainError("nodes_per_replica is at least 1, and above 1 only for members with cards",
                          field="nodes_per_replica")
    if max_surge == 0 and max_unavailable == 0:
        raise NotAllowed("max_surge and max_unavailable cannot both be 0: a rollout could replace nothing",
                         field="max_surge")
    if min_available is not None and min_available > (replicas if replicas is not None else world_size):
        raise DomainError(f"min_available {min_available} is above the group's "
                         f"{replicas if replicas is not None else world_size} replica(s): no drain could ever proceed",
                         field="min_available")
    if spread is not None and spread["across"] != "node" and not Node.objects.exclude(
            **{spread["across"]: ""}).exists():
        raise DomainError(f"no node has a {spread['across']}: the replicas could not spread across it",
                          field="spread.across")
    if window is not None:
        try:
            window = validate_window(window)
        except ValueError as problem:
            raise NotAllowed(str(problem), field="window") from None
    with transaction.atomic():
        group = TaskGroup.objects.create(
            tenant=tenant, name=name, type=type, world_size=world_size, gpus_per_worker=gpus_per_worker,
            parallelism=parallelism, gpu_type=gpu_type, replicas=replicas if type == TaskType.INFERENCE else None,
            window=window, image=image, command=command, max_restarts=max_restarts,
            tolerations=[dict(item) for item in tolerations or []], node_selector=node_selector or {},
            labels=labels or {},
            timeout_seconds=timeout_for(type=type, timeout_seconds=timeout_seconds),
            termination_grace_seconds=termination_grace_seconds,
            env=dict(env or {}), max_surge=max_surge, max_unavailable=max_unavailable,
            ready_timeout_seconds=ready_timeout_seconds, readiness=readiness, model=model,
            min_available=min_available, spread=spread, autoscale=autoscale, nodes_per_replica=nodes_per_replica,
        )
        GroupRevision.objects.create(group=group, number=group.revision, image=image, command=command,
                                     env=group.env, state=GroupRevision.State.COMPLETE)
        count = world_size if type == TaskType.TRAINING else (replicas if replicas is not None else world_size)
        if autoscale is not None:
            # It starts within its bounds; the autoscaler moves it from there.
            count = min(max(count, autoscale["min"]), autoscale["max"])
        if type == TaskType.TRAINING:
            ensure_pending_capacity(tenant=tenant, adding=count)
            for rank in range(count):
                create_member(group, rank=rank, priority=priority)
            return group
        ensure_pending_capacity(tenant=tenant, adding=count * nodes_per_replica)
        if group.replicas != count:
            group.replicas = count
            group.save(update_fields=["replicas"])
        for index in range(count):
            create_replica(group, index=index, priority=priority)
    return group
