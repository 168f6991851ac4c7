"""Gang bind (design §10, §5): a planned gang becomes placements in ONE transaction, every member or none.

The framework's Permit approves the plan (every member placed); then the gang is an all-or-nothing batch of the
bind pipeline (`scheduling.bind`): the same locks, live re-checks, quota rule and claim statement as any bind,
with each member's rank and the group's communication plan in its environment. Any refusal or lost
compare-and-swap rolls the whole batch back: nothing of a gang that does not fit is held.

`schedule_groups` is the cycle's entry: it plans and binds the gangs the queue hands it, in queue order. A gang
meets the framework's extension points like a task: its PreFilters once with its totals (`pre_filter_gang`), each
member Filter, Score and Reserve (`plan_gang`), the gang Permit, then Bind with `all_or_nothing`. A gang is a
training group, or one multi-node replica of an inference group (design §17.1): its members get ranks and a master
of their own, in their environment.
"""

import logging
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from django.db import transaction
from django.db.models import Q

from scheduling import lifecycle
from scheduling.bind import Placement, bind_placements
from scheduling.bind.live import LiveNode
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, refresh_nodes, task_info_from_row
from scheduling.diagnostics.attempts import AttemptBatch
from scheduling.framework import reasons
from scheduling.framework.framework import Framework
from scheduling.framework.registry import PluginSet
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo
from scheduling.groups.gang import GangFailure, GangPlan, GroupInfo, incomplete_gang, place_gang
from scheduling.groups.network import NodeAddress, communication_plan
from scheduling.models import Task, TaskGroup
from scheduling.queue.nomination import HeldCards

logger = logging.getLogger(__name__)

MASTER_PORT = 29500
MASTER_ADDR_VARIABLE = "MASTER_ADDR"
BACKEND_VARIABLE = "HETEROFLOW_DIST_BACKEND"
_GROUP_FIELDS = ("id", "tenant_id", "name", "world_size", "gpus_per_worker", "gpu_type", "parallelism")


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


class GangKey(NamedTuple):
    """A gang to place: a training group, or one multi-node replica of an inference group."""

    group_id: int
    replica: int | None = None


@dataclass(frozen=True)
class GangResult:
    """One gang's attempt in a cycle; `bound_tasks` are the members now scheduled (empty unless bound), `pending`
    the ids of the members it tried to place."""

    group_id: int
    code: str
    message: str
    bound_tasks: tuple[TaskInfo, ...] = ()
    replica: int | None = None
    pending: tuple[int, ...] = ()

    @property
    def bound_task_ids(self) -> tuple[int, ...]:
        return tuple(task.id for task in self.bound_tasks)

    @property
    def bound(self) -> bool:
        return self.code == reasons.SCHEDULED


def bind_gang(plan: GangPlan, *, config: SchedulerConfig | None = None, framework: Framework | None = None,
              snapshot: ClusterSnapshot | None = None) -> GangBindOutcome:
    """Bind every member of `plan` or none, through the framework's Bind (its plugins see the gang; what they skip
    is one all-or-nothing batch of the bind pipeline); record the group's diagnostics and every member's attempt
    either way. `framework` chooses cards again where the plan's went stale (its Reserve); Bind plugins see the
    members' nodes as `snapshot` holds them."""
    config = config or (framework.config if framework is not None else SchedulerConfig.from_settings())
    group = plan.group
    world_size = len(plan.placements)
    placements = [
        Placement(member.task, _node(snapshot, member.node_id, member.node_name), member.chosen_cards(),
                  reason=f"gang {group.name}: rank {member.rank} bound to {member.node_name}", rank=member.rank)
        for member in plan.placements
    ]
    bound: dict[str, str] = {}

    def env_for(live_nodes: Mapping[int, LiveNode]) -> list[dict[str, str]]:
        communication = communication_plan([_address(live_nodes[member.node_id]) for member in plan.placements])
        bound.update(master_addr=communication.master_addr, backend=communication.backend,
                     message=f"{plan.message}; master {communication.master_addr} ({communication.backend})")
        return [member_env(member.rank, world_size, communication.master_addr, communication.backend)
                for member in plan.placements]

    def after_claim(_live_nodes: Mapping[int, LiveNode]) -> None:
        message = bound["message"]
        # A training gang's master is its group's; each replica's is in its members' environment only.
        master = {} if group.replica is not None else {"master_addr": bound["master_addr"],
                                                        "backend": bound["backend"]}
        TaskGroup.objects.filter(id=group.id).update(
            **master, diagnostics={"code": reasons.SCHEDULED, "message": message, "member": None, "reason": ""},
        )
        attempts = AttemptBatch()
        for member in plan.placements:
            attempts.add(member.task.id, reasons.SCHEDULED, f"{message}; rank {member.rank} on {member.node_name}",
                         None, {"group": group.id, "rank": member.rank})
        attempts.flush()

    framework = framework or Framework(PluginSet(), config)
    outcomes = bind_placements(framework, placements, all_or_nothing=True, env_for=env_for, after_claim=after_claim)
    if outcomes[0].bound:
        return GangBindOutcome(reasons.SCHEDULED, bound["message"], bound["master_addr"], bound["backend"])
    position = next((index for index, outcome in enumerate(outcomes) if outcome.culprit), 0)
    member, refused = plan.placements[position], outcomes[position]
    reason = f"rank {member.rank}: {refused.message}"
    failure = GangFailure(group, refused.code, f"gang {group.name}: bind refused, nothing held: {reason}",
                          rank=member.rank, task_id=member.task.id, reason=reason)
    record_gang_failure(failure, [p.task.id for p in plan.placements])
    return GangBindOutcome(refused.code, failure.message)


def member_env(rank: int, world_size: int, master_addr: str, backend: str) -> dict[str, str]:
    return {
        MASTER_ADDR_VARIABLE: master_addr,
        "MASTER_PORT": str(MASTER_PORT),
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        BACKEND_VARIABLE: backend,
    }


def member_communication(env: dict[str, str]) -> tuple[str, str]:
    """(master address, backend) a bound member was given (`member_env`); empty strings before its bind."""
    return env.get(MASTER_ADDR_VARIABLE, ""), env.get(BACKEND_VARIABLE, "")


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


def schedule_groups(gangs: list[GangKey], snapshot: ClusterSnapshot, framework: Framework,
                    rng: random.Random, held: HeldCards | None = None) -> list[GangResult]:
    """Plan and bind these gangs in this order, each whole or not at all; a bound gang is applied to `snapshot`
    (its cards and its tenant's quota usage) so the rest of the cycle sees it. `held`: the cycle's held cards — a
    reserved gang's members see theirs during its attempt (design §16.3), held again if it does not bind."""
    held = held if held is not None else HeldCards()
    return [_schedule_one(group, live, snapshot, framework, rng, held) for group, live in read_gangs(gangs)]


def read_gangs(gangs: list[GangKey]) -> list[tuple[GroupInfo, list]]:
    """The gangs that exist, in that order, each with [(TaskInfo, status)] of its members not yet finished, by
    rank; a replica's `world_size` is its group's `nodes_per_replica`."""
    rows = TaskGroup.objects.filter(id__in={gang.group_id for gang in gangs}).values_list(*_GROUP_FIELDS,
                                                                                         "nodes_per_replica")
    groups = {row[0]: row for row in rows}
    members_of = _live_members(gangs)
    return [(_group_info(groups[gang.group_id], gang.replica), members_of.get(gang, []))
            for gang in gangs if gang.group_id in groups]


def _group_info(row: tuple, replica: int | None) -> GroupInfo:
    *fields, nodes_per_replica = row
    info = GroupInfo(**dict(zip(_GROUP_FIELDS, fields)))
    if replica is None:
        return info
    return replace(info, name=f"{info.name} replica {replica}", world_size=nodes_per_replica, replica=replica)


def _schedule_one(group: GroupInfo, live: list, snapshot: ClusterSnapshot, framework: Framework,
                  rng: random.Random, held: HeldCards) -> GangResult:
    pending = [task for task, status in live if status == lifecycle.PENDING]
    result = _attempt(group, live, pending, snapshot, framework, rng, held)
    return replace(result, replica=group.replica, pending=tuple(task.id for task in pending))


def _attempt(group: GroupInfo, live: list, pending: list[TaskInfo], snapshot: ClusterSnapshot,
             framework: Framework, rng: random.Random, held: HeldCards) -> GangResult:
    incomplete = incomplete_gang(group, live)
    if incomplete is not None:
        return _failed(incomplete, pending)
    for task in pending:
        held.release_for(task, snapshot)
    result = None
    try:
        result = _place_and_bind(group, pending, snapshot, framework, rng)
        return result
    finally:
        # Unless it bound (an unexpected error included), a reserved gang's cards are held for it again.
        if result is None or not result.bound:
            for task in pending:
                held.restore_for(task, snapshot)


def _place_and_bind(group: GroupInfo, pending: list[TaskInfo], snapshot: ClusterSnapshot, framework: Framework,
                    rng: random.Random) -> GangResult:
    outcome = place_gang(group, pending, snapshot, framework, rng)
    if isinstance(outcome, GangFailure):
        return _failed(outcome, pending)
    bound = bind_gang(outcome, framework=framework, snapshot=snapshot)
    if not bound:
        # Live data disagreed with the snapshot: refresh those nodes so the rest of the cycle judges them right.
        refresh_nodes(snapshot, outcome.node_ids)
        return GangResult(group.id, bound.code, bound.message)
    outcome.apply_to(snapshot)
    return GangResult(group.id, reasons.SCHEDULED, bound.message, tuple(p.task for p in outcome.placements))


def _failed(failure: GangFailure, members: list) -> GangResult:
    record_gang_failure(failure, [task.id for task in members])
    return GangResult(failure.group.id, failure.code, failure.message)


def _live_members(gangs: list[GangKey]) -> dict[GangKey, list]:
    """Each gang's [(TaskInfo, status)] of its members not yet finished, by rank."""
    if not gangs:
        return {}
    of_gangs = Q()
    for gang in gangs:
        of_gangs |= Q(group_id=gang.group_id, replica=gang.replica) if gang.replica is not None else Q(
            group_id=gang.group_id)
    rows = (Task.objects.filter(of_gangs).exclude(status__in=lifecycle.TERMINAL_STATES)
            .order_by("group_id", "replica", "rank", "id").values_list(*TASK_INFO_FIELDS, "replica", "status"))
    members: dict[GangKey, list] = {}
    for *fields, replica, status in rows:
        task = task_info_from_row(tuple(fields))
        members.setdefault(GangKey(task.group_id, replica), []).append((task, status))
    return members


def _node(snapshot: ClusterSnapshot | None, node_id: int, name: str) -> NodeInfo:
    node = snapshot.node(node_id) if snapshot is not None else None
    return node if node is not None else NodeInfo(id=node_id, name=name)


def _address(node: LiveNode) -> NodeAddress:
    return NodeAddress(node_id=node.id, labels=node.labels, internal_ip=node.internal_ip, public_ip=node.public_ip)
