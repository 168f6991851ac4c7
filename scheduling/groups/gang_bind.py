"""Gang bind (SPEC §10, §5): a planned gang becomes placements in ONE transaction, every member or none.

The transaction locks the involved node rows in id order (two gangs sharing nodes cannot deadlock, and a single
bind locks one node, so it cannot either), re-checks each node and card against live data with the single-task
bind's own rules, checks the tenant quota for the whole gang, then claims every member `pending → scheduled`
through `task_transition` with its rank and the group's communication plan in its environment. Any refusal or
lost compare-and-swap raises inside the transaction: nothing of a gang that does not fit is held.

`schedule_pending_groups` is the cycle's entry: once per cycle it plans and binds every waiting training gang.
"""

import logging
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max

from nodes.models import GPU, Node
from scheduling import lifecycle, quotas
from scheduling.bind import BindRefused, card_under_thresholds, recheck_node
from scheduling.diagnostics import AttemptBatch
from scheduling.framework import reasons
from scheduling.framework.framework import Framework, apply_bind
from scheduling.framework.snapshot import CardInfo, ClusterSnapshot, SchedulerConfig
from scheduling.groups.gang import GangFailure, GangPlan, GroupInfo, MemberPlacement, plan_gang
from scheduling.groups.network import NodeAddress, communication_plan
from scheduling.groups.status import refresh_group_status
from scheduling.models import Task, TaskGroup, TaskType
from scheduling.services.task_transition import task_transition
from scheduling.snapshot_builder import TASK_INFO_FIELDS, refresh_node, task_info_from_row

logger = logging.getLogger(__name__)

MASTER_PORT = 29500
GANG_GROUPS_PER_CYCLE = 50
_GROUP_FIELDS = ("id", "tenant_id", "name", "world_size", "gpus_per_worker", "gpu_type", "parallelism")
_LIVE_NODE_FIELDS = ("id", "name", "status", "schedulable", "dedicated_tenant_id", "cpu_percent", "memory_used_mb",
                     "memory_gb", "gpu_total", "gpu_used", "labels", "internal_ip", "public_ip")


@dataclass(frozen=True)
class GangBindOutcome:
    code: str
    message: str
    master_addr: str = ""
    backend: str = ""

    @property
    def bound(self) -> bool:
        return self.code == reasons.SCHEDULED

    def __bool__(self) -> bool:
        return self.bound


@dataclass(frozen=True)
class GangResult:
    """One gang's attempt in a cycle; `bound_task_ids` are the members now scheduled (empty unless bound)."""

    group_id: int
    code: str
    message: str
    bound_task_ids: tuple[int, ...] = ()

    @property
    def bound(self) -> bool:
        return self.code == reasons.SCHEDULED


class _GangRefused(Exception):
    def __init__(self, code: str, message: str, placement: MemberPlacement | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.placement = placement


def bind_gang(plan: GangPlan, *, config: SchedulerConfig | None = None) -> GangBindOutcome:
    """Bind every member of `plan` or none; record the group's diagnostics and every member's attempt either way."""
    config = config or SchedulerConfig.from_settings()
    group = plan.group
    try:
        with transaction.atomic():
            live_nodes = _lock_nodes(plan.node_ids)
            _recheck(plan, live_nodes, config)
            _check_quota(plan)
            communication = communication_plan([_address(live_nodes[p.node_id]) for p in plan.placements])
            for placement in plan.placements:
                env = member_env(placement.rank, len(plan.placements), communication.master_addr,
                                 communication.backend)
                won = task_transition(
                    placement.task.id, lifecycle.PENDING, lifecycle.SCHEDULED,
                    reason=f"gang {group.name}: rank {placement.rank} bound to {placement.node_name}",
                    node=placement.node_id, gpus=list(placement.cards), env=env, rank=placement.rank,
                    derive_group_status=False,
                )
                if not won:
                    raise _GangRefused(reasons.BIND_CONFLICT,
                                       f"rank {placement.rank} (task {placement.task.id}) is no longer pending",
                                       placement)
            refresh_group_status(group.id)
            message = f"{plan.message}; master {communication.master_addr} ({communication.backend})"
            TaskGroup.objects.filter(id=group.id).update(
                master_addr=communication.master_addr,
                backend=communication.backend,
                diagnostics={"code": reasons.SCHEDULED, "message": message, "member": None, "reason": ""},
            )
            attempts = AttemptBatch()
            for placement in plan.placements:
                attempts.add(placement.task.id, reasons.SCHEDULED,
                             f"{message}; rank {placement.rank} on {placement.node_name}", None,
                             {"group": group.id, "rank": placement.rank})
            attempts.flush()
    except _GangRefused as refused:
        placement = refused.placement
        failure = GangFailure(
            group, refused.code, f"gang {group.name}: bind refused, nothing held: {refused.message}",
            rank=placement.rank if placement else None, task_id=placement.task.id if placement else None,
            reason=refused.message,
        )
        record_gang_failure(failure, [p.task.id for p in plan.placements])
        return GangBindOutcome(refused.code, failure.message)
    return GangBindOutcome(reasons.SCHEDULED, message, communication.master_addr, communication.backend)


def member_env(rank: int, world_size: int, master_addr: str, backend: str) -> dict[str, str]:
    return {
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(MASTER_PORT),
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "HETEROFLOW_DIST_BACKEND": backend,
    }


def record_gang_failure(failure: GangFailure, member_ids: Iterable[int]) -> None:
    """The group's diagnostics and each member's attempt for a gang that stays pending."""
    with transaction.atomic():
        TaskGroup.objects.filter(id=failure.group.id).update(diagnostics=failure.diagnostics())
        attempts = AttemptBatch()
        for task_id in member_ids:
            nodes = failure.nodes if task_id == failure.task_id else None
            attempts.add(task_id, failure.code, failure.message, nodes,
                         {"group": failure.group.id, "member": failure.diagnostics()["member"]})
        attempts.flush()


def gang_group_ids(group_ids: Iterable[int]) -> frozenset[int]:
    """Which of these groups are gangs (training, world_size > 1): their members are placed only together, by
    `schedule_pending_groups`, never one by one."""
    ids = {group_id for group_id in group_ids if group_id is not None}
    if not ids:
        return frozenset()
    return frozenset(TaskGroup.objects.filter(id__in=ids, type=TaskType.TRAINING, world_size__gt=1)
                     .values_list("id", flat=True))


def schedule_pending_groups(snapshot: ClusterSnapshot, framework: Framework, rng: random.Random, *,
                            exclude_task_ids: Iterable[int] = (), usage: quotas.QuotaUsage | None = None,
                            limit: int = GANG_GROUPS_PER_CYCLE) -> list[GangResult]:
    """Plan and bind the waiting training gangs, highest member priority first; a bound gang is applied to
    `snapshot` (and `usage`) so the rest of the cycle sees its cards taken. Groups with a member in
    `exclude_task_ids` are left alone this time."""
    excluded = set(exclude_task_ids)
    groups = _waiting_gangs(limit)
    members_of = _live_members({group.id for group in groups})
    results = []
    for group in groups:
        live = members_of.get(group.id, [])
        if excluded & {task.id for task, _status in live}:
            continue
        results.append(_schedule_one(group, live, snapshot, framework, rng, usage))
    return results


def _schedule_one(group: GroupInfo, live: list, snapshot: ClusterSnapshot, framework: Framework,
                  rng: random.Random, usage: quotas.QuotaUsage | None) -> GangResult:
    pending = [task for task, status in live if status == lifecycle.PENDING]
    if len(pending) != len(live) or len(pending) != group.world_size:
        failure = GangFailure(group, reasons.GANG_INCOMPLETE,
                              f"gang {group.name}: {len(pending)} of {group.world_size} members pending, "
                              f"{len(live) - len(pending)} still active; a gang is placed only whole")
        return _failed(failure, pending)
    refusal = _quota_refusal(group, pending, usage)
    if refusal is not None:
        return _failed(refusal, pending)
    outcome = plan_gang(group, pending, snapshot, framework, rng)
    if isinstance(outcome, GangFailure):
        return _failed(outcome, pending)
    bound = bind_gang(outcome, config=framework.config)
    if not bound:
        # Live data disagreed with the snapshot: refresh those nodes so the rest of the cycle judges them right.
        for node_id in outcome.node_ids:
            refresh_node(snapshot, node_id)
        return GangResult(group.id, bound.code, bound.message)
    for placement in outcome.placements:
        apply_bind(snapshot, placement.task, snapshot.node(placement.node_id), list(placement.cards))
        if usage is not None:
            usage.record_bind(placement.task)
    return GangResult(group.id, reasons.SCHEDULED, bound.message, tuple(p.task.id for p in outcome.placements))


def _failed(failure: GangFailure, members: list) -> GangResult:
    record_gang_failure(failure, [task.id for task in members])
    return GangResult(failure.group.id, failure.code, failure.message)


def _quota_refusal(group: GroupInfo, members: list, usage: quotas.QuotaUsage | None) -> GangFailure | None:
    quota = usage.quotas.get(group.tenant_id) if usage is not None else None
    asked = sum(task.gpu_required for task in members)
    if quota is None or usage.used.get(group.tenant_id, 0) + asked <= quota:
        return None
    message = quotas.quota_message(used=usage.used.get(group.tenant_id, 0), quota=quota, asked=asked)
    return GangFailure(group, reasons.QUOTA_EXCEEDED, f"gang {group.name}: {message}", reason=message)


def _waiting_gangs(limit: int) -> list[GroupInfo]:
    rows = (
        TaskGroup.objects.filter(type=TaskType.TRAINING, world_size__gt=1, members__status=lifecycle.PENDING)
        .exclude(status=TaskGroup.Status.STOPPED)
        .annotate(top_priority=Max("members__priority"))
        .order_by("-top_priority", "created_at", "id")
        .values_list(*_GROUP_FIELDS)[:limit]
    )
    return [GroupInfo(**dict(zip(_GROUP_FIELDS, row))) for row in rows]


def _live_members(group_ids: set[int]) -> dict[int, list]:
    """group id → [(TaskInfo, status)] of its members not yet finished, by rank."""
    if not group_ids:
        return {}
    rows = (Task.objects.filter(group_id__in=group_ids).exclude(status__in=lifecycle.TERMINAL_STATES)
            .order_by("group_id", "rank", "id").values_list(*TASK_INFO_FIELDS, "status"))
    members: dict[int, list] = {}
    for *fields, status in rows:
        task = task_info_from_row(tuple(fields))
        members.setdefault(task.group_id, []).append((task, status))
    return members


def _lock_nodes(node_ids: list[int]) -> dict[int, dict[str, Any]]:
    rows = Node.objects.select_for_update().filter(id__in=node_ids).order_by("id").values(*_LIVE_NODE_FIELDS)
    live = {row["id"]: row for row in rows}
    missing = set(node_ids) - set(live)
    if missing:
        raise _GangRefused(reasons.NO_SCHEDULABLE_NODES, f"nodes {sorted(missing)} no longer exist")
    return live


def _recheck(plan: GangPlan, live_nodes: dict[int, dict[str, Any]], config: SchedulerConfig) -> None:
    """SPEC §5.2 for every node and card of the plan against the rows just locked: node state, dedication, load
    thresholds, the gpu_used ledger, and per card existence, no active occupant, load and memory after reserve."""
    by_node: dict[int, list[MemberPlacement]] = {}
    for placement in plan.placements:
        by_node.setdefault(placement.node_id, []).append(placement)
    cards = _live_cards(list(by_node))
    for node_id, placements in sorted(by_node.items()):
        row = live_nodes[node_id]
        _check_live_node(row, placements, plan.group.tenant_id, config)
        taken: set[int] = set()
        for placement in placements:
            for index in placement.cards:
                card = cards.get((node_id, index))
                problem = "taken by another member" if index in taken else _card_problem(card, placement, config)
                if problem:
                    code = reasons.LOAD_THRESHOLD_EXCEEDED if problem.startswith("over") else \
                        reasons.INSUFFICIENT_RESOURCES
                    raise _GangRefused(code, f"rank {placement.rank}: card {index} of {row['name']} {problem}",
                                       placement)
                taken.add(index)


def _check_live_node(row: dict[str, Any], placements: list[MemberPlacement], tenant_id: int,
                     config: SchedulerConfig) -> None:
    try:
        recheck_node(name=row["name"], status=row["status"], schedulable=row["schedulable"],
                     dedicated_tenant_id=row["dedicated_tenant_id"], cpu_percent=row["cpu_percent"],
                     memory_used_mb=row["memory_used_mb"], memory_gb=row["memory_gb"], gpu_total=row["gpu_total"],
                     gpu_used=row["gpu_used"], tenant_id=tenant_id,
                     gpus_needed=sum(placement.task.gpu_required for placement in placements), config=config,
                     needed_by=f"its {len(placements)} members")
    except BindRefused as refused:
        raise _GangRefused(refused.code, refused.message, placements[0]) from refused


def _card_problem(card: CardInfo | None, placement: MemberPlacement, config: SchedulerConfig) -> str:
    if card is None:
        return "does not exist"
    if not card.is_free:
        return "is taken"
    if not card_under_thresholds(card, config):
        return (f"over a load threshold ({card.memory_utilization_percent:.1f} % memory, {card.utilization:g} % "
                f"utilisation, {card.temperature:g} °C)")
    if placement.task.gpu_memory_mb and config.card_free_mb(card) < placement.task.gpu_memory_mb:
        return f"has {max(config.card_free_mb(card), 0):.0f} MB free after reserve"
    return ""


def _live_cards(node_ids: list[int]) -> dict[tuple[int, int], CardInfo]:
    """The cards of `node_ids` as the database holds them now, with their active occupants."""
    cards = {
        (node_id, index): CardInfo(index=index, memory_total_mb=total, memory_used_mb=used, utilization=utilization,
                                   temperature=temperature)
        for node_id, index, total, used, utilization, temperature in GPU.objects.filter(node_id__in=node_ids)
        .values_list("node_id", "index", "memory_total_mb", "memory_used_mb", "utilization", "temperature")
    }
    occupants = Task.objects.filter(node_id__in=node_ids, status__in=lifecycle.ACTIVE_STATES) \
        .values_list("node_id", "gpus", "shard")
    for node_id, gpus, shard in occupants:
        for index in ([shard.get("card")] if shard else gpus or ()):
            card = cards.get((node_id, index))
            if card is not None:
                card.whole_card_tasks += 0 if shard else 1
                card.shard_tasks += 1 if shard else 0
    return cards


def _check_quota(plan: GangPlan) -> None:
    first = plan.placements[0].task
    try:
        quotas.lock_and_check_quota(task_id=first.id, tenant_id=plan.group.tenant_id,
                                    gpu_required=sum(p.task.gpu_required for p in plan.placements))
    except quotas.QuotaExceededError as error:
        raise _GangRefused(reasons.QUOTA_EXCEEDED, str(error)) from error


def _address(row: dict[str, Any]) -> NodeAddress:
    return NodeAddress(node_id=row["id"], labels=row["labels"] or {}, internal_ip=row["internal_ip"] or "",
                       public_ip=row["public_ip"])
