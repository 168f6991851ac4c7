"""Reads: the tasks and groups a user may see, which tasks hold a node's cards, what a node's agent must do, and
the plugin set the scheduler runs with."""

import ipaddress
from dataclasses import replace
from decimal import Decimal

from django.db.models import Count, F, Prefetch, Q, QuerySet, Sum

from heteroflow_site.permissions import is_admin
from nodes.models import Node
from scheduling import lifecycle
from scheduling.fair_share.book import CARD
from scheduling.fair_share.usage import share_expression
from scheduling.framework.occupancy import cards_held
from scheduling.framework.registry import PluginSet, PluginSetting, PluginSpec, Registry, build_plugin_set, outranked
from scheduling.framework.snapshot import TaskInfo
from scheduling.models import GRACE_OF_STOP, CycleRecord, PluginConfig, Task, TaskGroup, TaskTemplate, TaskType
from scheduling.plugins import default_registry
from scheduling.plugins.queue_sort import ORDER_DESCRIPTIONS
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, task_info_from_row
from tenants.selectors import tenant_of

RECENT_CYCLES = 10
NO_ATTEMPT = "not attempted yet"


def _visible_to(rows: QuerySet, user) -> QuerySet:
    """Admins see every row; a tenant user only its tenant's; anyone else nothing."""
    if is_admin(user):
        return rows
    tenant = tenant_of(user)
    return rows.filter(tenant=tenant) if tenant else rows.none()


def templates_visible_to(user) -> QuerySet[TaskTemplate]:
    return _visible_to(TaskTemplate.objects.all(), user)


def tasks_visible_to(user) -> QuerySet[Task]:
    return _visible_to(Task.objects.select_related("tenant", "node", "attempt"), user)


def task_list_visible_to(user) -> QuerySet[Task]:
    """`tasks_visible_to` for lists: each task's latest attempt without its per-node entries (some 20 KB a task)."""
    return tasks_visible_to(user).defer("attempt__nodes", "attempt__extra")


def groups_visible_to(user) -> QuerySet[TaskGroup]:
    return _visible_to(TaskGroup.objects.select_related("tenant"), user)


def _current_run_members() -> QuerySet[Task]:
    return (Task.objects.filter(group_run=F("group__restarts")).select_related("node")
            .order_by("replica", "rank", "id"))


def group_list_visible_to(user) -> QuerySet[TaskGroup]:
    """`groups_visible_to` for lists: every group's current members read in one query for the page, not one per
    group (`group_members` finds them)."""
    return groups_visible_to(user).prefetch_related(
        Prefetch("members", queryset=_current_run_members(), to_attr="current_members"))


def group_members(group: TaskGroup) -> list[Task]:
    """The member tasks of the group's current run by replica and rank, with their nodes (a restarted gang keeps
    its earlier runs as history)."""
    prefetched = getattr(group, "current_members", None)
    if prefetched is not None:
        return prefetched
    return list(_current_run_members().filter(group=group))


def task_rows(*, task_ids, tenant_id: int | None) -> QuerySet[Task]:
    """The given tasks as they are now, in id order; with `tenant_id` only that tenant's."""
    tasks = Task.objects.select_related("tenant", "node").filter(id__in=list(task_ids)).order_by("id")
    return tasks.filter(tenant_id=tenant_id) if tenant_id is not None else tasks


def pending_queue(*, limit: int) -> QuerySet[Task]:
    """The head of the pending queue in queue order (design §15.1; parked tasks included, `queue_state` tells)."""
    return (Task.objects.filter(status=lifecycle.PENDING).select_related("tenant", "attempt", "nominated_node")
            .order_by("-priority", "created_at", "id")[:limit])


def queue_head(*, limit: int) -> list[TaskInfo]:
    """The first `limit` pending tasks that are placed one by one, in queue order (priority descending, then
    creation time, then id), as the scheduler sees them. Members of training gangs and of multi-node replicas are
    left out: a gang is placed whole, by its own path."""
    gang_members = Q(group__type=TaskType.TRAINING, group__world_size__gt=1) | Q(replica__isnull=False)
    rows = (Task.objects.filter(status=lifecycle.PENDING).exclude(gang_members)
            .order_by("-priority", "created_at", "id").values_list(*TASK_INFO_FIELDS)[:limit])
    return [task_info_from_row(row) for row in rows]


def pending_by_code(tasks: QuerySet[Task]) -> list[dict]:
    """How many of `tasks` wait, by the code of their last attempt."""
    rows = (
        tasks.filter(status=lifecycle.PENDING).values("attempt__code").annotate(n=Count("id")).order_by("-n")
    )
    return [{"code": row["attempt__code"] or NO_ATTEMPT, "count": row["n"]} for row in rows]


def recent_cycles(limit: int = RECENT_CYCLES) -> QuerySet[CycleRecord]:
    return CycleRecord.objects.all()[:limit]


def node_card_holders(*, node: Node, tenant_id: int | None = None) -> dict[tuple[str, int], list[dict]]:
    """{(card type, index): the active tasks holding it}, for the node page and API; with `tenant_id` only that
    tenant's. Each vendor numbers its cards from 0: a task's indexes name cards of the type bind chose for it
    (`card_type`), else of its own `gpu_type`, else of the node's majority type (docs/scheduling.md)."""
    active = (Task.objects.filter(node=node, status__in=lifecycle.ACTIVE_STATES).select_related("tenant")
              .annotate(share=share_expression()).order_by("id"))
    if tenant_id is not None:
        active = active.filter(tenant_id=tenant_id)
    tasks_by_card: dict[tuple[str, int], list[dict]] = {}
    for task in active:
        # `cards`: what the task holds, a fractional one its share of its card — as quotas count it (design §16.2).
        entry = {"id": task.id, "name": task.name, "tenant": task.tenant.name, "status": task.status,
                 "gpu_required": task.gpu_required, "gpu_memory_mb": task.gpu_memory_mb,
                 "fractional": task.is_fractional, "cards": Decimal(task.share) / CARD}
        for index in cards_held(task.gpus, task.shard):
            tasks_by_card.setdefault((task.card_type or task.gpu_type or node.gpu_type, index), []).append(entry)
    return tasks_by_card




def fractional_cards_held(*, node_ids: list[int]) -> dict[int, Decimal]:
    """Per node, the cards its fractional tasks hold, each its share of its card as quotas count it (design §16.2):
    what the ledger's `gpu_used`, whole cards only, leaves out (the node list adds it, as the node page does)."""
    rows = (Task.objects.filter(node_id__in=node_ids, status__in=lifecycle.ACTIVE_STATES, gpu_required=0,
                                gpu_memory_mb__gt=0)
            .values("node_id").annotate(total=Sum(share_expression())).order_by().values_list("node_id", "total"))
    return {node_id: Decimal(total) / CARD for node_id, total in rows if total}


def agent_work(node: Node, *, probes: bool = False) -> dict:
    """What the node's agent must do now: start its scheduled tasks, stop its stopping/preempting ones; with
    `probes`, how to probe the replicas running there (for an agent that adopted them after a restart)."""
    to_start = (Task.objects.filter(node=node, status=lifecycle.SCHEDULED).select_related("group")
                .order_by("-priority", "created_at", "id"))
    to_stop = Task.objects.filter(node=node, status__in=[lifecycle.STOPPING, lifecycle.PREEMPTING]).order_by("id")
    return {
        "start": [
            {
                "id": task.id,
                "name": task.name,
                "image": task.image,
                "command": task.command,
                "type": task.type,
                # The cards' own type: a task without gpu_type may hold cards of any one type (design §15.3).
                "gpu_type": task.card_type or task.gpu_type,
                "gpus": list(task.gpus),
                "port": task.port,
                "env": _container_env(task),
                "labels": task.labels,
                "priority": task.priority,
                # What the runtime confines the container to (design §16.5).
                "tenant": task.tenant_id,
                "cpu_cores": task.cpu_cores,
                "memory_mb": task.memory_mb,
                "node_address": host_address(node.internal_ip),
                "readiness": _readiness(task),
                "metric": _metric(task),
            }
            for task in to_start
        ],
        # One stop path for a user's stop, a preemption and a timeout: each gives the container its grace
        # (design §17.1).
        "stop": [{"id": task_id, "status": status, "grace_seconds": grace}
                 for task_id, status, grace in to_stop.annotate(grace=GRACE_OF_STOP).values_list("id", "status",
                                                                                                  "grace")],
        "probe": _probes(node) if probes else [],
    }


def _metric(task: Task) -> dict | None:
    """What the agent reports of an autoscaled replica with its heartbeats (design §17.2): the metric and, for those
    read from the replica's Prometheus `/metrics`, the metric name there."""
    autoscale = task.group.autoscale if task.group_id is not None else None
    if not autoscale:
        return None
    return {"metric": autoscale["metric"], "name": autoscale.get("metric_name") or autoscale["metric"]}


def _probes(node: Node) -> list[dict]:
    running = (Task.objects.filter(node=node, status=lifecycle.RUNNING, group__readiness__isnull=False)
               .select_related("group").only("id", "port", "replica", "rank", "group__readiness"))
    return [{"id": task.id, "port": task.port, "node_address": host_address(node.internal_ip),
             "readiness": readiness} for task in running if (readiness := _readiness(task)) is not None]


def host_address(internal_ip: str) -> str:
    """The node's internal address without its prefix length (`10.0.3.7/24` → `10.0.3.7`): what docker publishes a
    port on; empty when there is none or it is not an address."""
    try:
        return str(ipaddress.ip_interface(internal_ip.strip()).ip) if internal_ip else ""
    except ValueError:
        return ""


def _readiness(task: Task) -> dict | None:
    """The group's readiness probe, on the replica's published port unless it names one (design §17.2); of a
    multi-node replica, only its master (rank 0) is probed: it serves (design §17.1)."""
    readiness = task.group.readiness if task.group_id is not None else None
    if not readiness or task.replica is not None and task.rank != 0:
        return None
    return {**readiness, "port": readiness.get("port") or task.port}


def _container_env(task: Task) -> dict[str, str]:
    shard_env = (task.shard or {}).get("env") or {}
    return {**task.env, **{key: str(value) for key, value in shard_env.items()}}


def plugin_specs() -> Registry:
    """Every registered plugin by name, built-ins first, in registry order."""
    return default_registry()


def default_setting(spec: PluginSpec) -> PluginSetting:
    return PluginSetting(name=spec.name, enabled=spec.default.enabled, weight=spec.default.weight,
                         extra=dict(spec.default.extra))


def current_plugin_settings(registry: Registry | None = None) -> list[PluginSetting]:
    """One setting per registered plugin, from its row (one query) or, without a row, from its defaults; as the
    scheduler runs it: a plugin that gives way to an exclusive one also enabled reads disabled (`outranked`)."""
    registry = registry if registry is not None else plugin_specs()
    rows = {row.name: row for row in PluginConfig.objects.all()}
    settings = []
    for spec in registry.values():
        row = rows.get(spec.name)
        if row is None:
            settings.append(default_setting(spec))
            continue
        # A forced filter stays on whatever a row says: no path may disable it.
        settings.append(PluginSetting(name=row.name, enabled=row.enabled or spec.always_on, weight=row.weight,
                                      extra=dict(row.extra)))
    losers = outranked([setting.name for setting in settings if setting.enabled], registry)
    return [replace(setting, enabled=False) if setting.name in losers else setting for setting in settings]


def current_plugin_set() -> PluginSet:
    """The plugin set the scheduler runs with; each cycle loads it through here, so a change applies at once."""
    registry = plugin_specs()
    return build_plugin_set(current_plugin_settings(registry), registry)


def queue_order_in_force() -> dict[str, str]:
    """The `queue-sort` order the next cycle applies and what it means (design §17.1), for the pages that say it."""
    order = current_plugin_set().queue_order
    return {"order": order, "description": ORDER_DESCRIPTIONS[order]}
