"""Gang placement (design §10): every member gets a node and cards, or the gang gets nothing. A gang is a training
group, or one multi-node replica of an inference group (design §17.1), whose members take one node each.

Pure over the cycle's snapshot: members are placed in rank order on a copy-on-write scratch view of it, each through
the framework's Filter, Score and Reserve (its PreFilters ran once for the gang's totals), so a node's capacity is
never counted twice; the parallelism path (`parallelism.py`) orders the nodes that pass. Rank 0's node is the master.
Nothing here touches the database: `gang_bind.bind_gang` turns a `GangPlan` into placements.
"""

import random
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from scheduling import lifecycle
from scheduling.framework import reasons
from scheduling.framework.cards import ChosenCards
from scheduling.framework.framework import Framework, refusal_code
from scheduling.framework.never_fits import never_fits
from scheduling.framework.occupancy import apply_bind
from scheduling.framework.result import ScheduleResult
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, TaskInfo
from scheduling.groups.parallelism import PlanContext, path_key
from scheduling.plugins import availability
from scheduling.plugins import tenant as tenant_filter


@dataclass(frozen=True)
class GroupInfo:
    id: int
    tenant_id: int
    name: str
    world_size: int
    gpus_per_worker: int
    gpu_type: str = ""
    parallelism: str = "data"
    # The multi-node replica this gang is (`world_size` then its members), None for a training gang.
    replica: int | None = None

    @property
    def one_per_node(self) -> bool:
        """A replica's members take a node each (design §17.1); a training gang's may share one."""
        return self.replica is not None


@dataclass(frozen=True)
class MemberPlacement:
    rank: int
    task: TaskInfo
    node_id: int
    node_name: str
    cards: tuple[int, ...]
    card_type: str = ""

    def chosen_cards(self) -> ChosenCards:
        return ChosenCards(self.cards, self.card_type)


@dataclass
class GangPlan:
    group: GroupInfo
    placements: list[MemberPlacement]  # by rank; rank 0 runs on the master node
    message: str

    @property
    def node_ids(self) -> list[int]:
        return sorted({placement.node_id for placement in self.placements})

    def apply_to(self, snapshot: ClusterSnapshot) -> None:
        """Every member's placement applied to the snapshot (`apply_bind`), so the rest of the queue sees them."""
        for placement in self.placements:
            apply_bind(snapshot, placement.task, snapshot.node(placement.node_id), placement.chosen_cards())


@dataclass
class GangFailure:
    """Why the gang does not fit now. `rank`/`task_id` name the first member that found no place (None when the
    gang as a whole is refused, e.g. its GPU type is out of reach); `reason` is that attempt's summary line."""

    group: GroupInfo
    code: str
    message: str
    rank: int | None = None
    task_id: int | None = None
    reason: str = ""
    nodes: dict[str, Any] = field(default_factory=dict)  # as SchedulingAttempt.nodes stores them

    def diagnostics(self) -> dict[str, Any]:
        """The TaskGroup.diagnostics document: {code, message, member, reason}."""
        member = None if self.rank is None else {"rank": self.rank, "task": self.task_id}
        return {"code": self.code, "message": self.message, "member": member, "reason": self.reason}


def incomplete_gang(group: GroupInfo, live: list[tuple[TaskInfo, str]]) -> GangFailure | None:
    """Why a gang cannot be placed at all now (`live`: its unfinished members with their status — some missing or
    still active), or None when all `world_size` of them are pending."""
    pending = [task for task, status in live if status == lifecycle.PENDING]
    if len(pending) == len(live) == group.world_size:
        return None
    return GangFailure(group, reasons.GANG_INCOMPLETE,
                       f"gang {group.name}: {len(pending)} of {group.world_size} members pending, "
                       f"{len(live) - len(pending)} still active; a gang is placed only whole")


def place_gang(group: GroupInfo, members: list[TaskInfo], snapshot: ClusterSnapshot, framework: Framework,
               rng: random.Random) -> GangPlan | GangFailure:
    """A gang's whole attempt short of Bind, in the cycle's order: its PreFilters once with its totals, each member
    through Filter, Score and Reserve (`plan_gang`), then the gang Permit. The cycle binds what it returns; the
    what-if preview applies it to its copy of the cluster."""
    for rank, member in enumerate(members):
        impossible = never_fits(member, snapshot)
        if impossible is not None:
            message = f"gang {group.name}: member rank {rank} (task {member.id}): {impossible}"
            return GangFailure(group, reasons.NEVER_FITS, message, rank=rank, task_id=member.id, reason=impossible)
    admission = framework.pre_filter_gang(members, snapshot)
    if not admission.is_success:
        return GangFailure(group, refusal_code(admission), f"gang {group.name}: {admission.reason}",
                           reason=admission.reason)
    outcome = plan_gang(group, members, snapshot, framework, rng)
    if isinstance(outcome, GangFailure):
        return outcome
    permit = framework.permit([(p.task, snapshot.node(p.node_id), list(p.cards)) for p in outcome.placements],
                              world_size=group.world_size, tenancy=snapshot.tenancy)
    if not permit.is_success:
        return GangFailure(group, permit.attempt_code or reasons.GANG_INCOMPLETE,
                           f"gang {group.name}: {permit.reason}", reason=permit.reason)
    return outcome


def plan_gang(group: GroupInfo, members: list[TaskInfo], snapshot: ClusterSnapshot, framework: Framework,
              rng: random.Random) -> GangPlan | GangFailure:
    """Place `members` (in rank order: members[i] gets rank i) on `snapshot` without changing it. The gang's
    PreFilters ran already (`Framework.pre_filter_gang`): each member meets the Filters, Scores and Reserve."""
    gpu_type = common_gpu_type(members)
    scratch = _Scratch(snapshot)
    order = path_key(group.parallelism)
    context: PlanContext | None = None
    placements: list[MemberPlacement] = []
    for rank, member in enumerate(members):
        result = framework.schedule(member, scratch.snapshot, rng, admitted=True)
        totals = result.totals
        feasible = [node for node in map(scratch.node, totals) if node is not None
                    and (not gpu_type or gpu_type in node.gpu_types)]
        taken = {placement.node_id for placement in placements} if group.one_per_node else set()
        candidates = [node for node in feasible if node.id not in taken]
        if not candidates and not placements and gpu_type:
            unavailable = gpu_type_unavailable(gpu_type, result, snapshot)
            if unavailable:
                return GangFailure(group, reasons.GPU_TYPE_UNAVAILABLE, unavailable, reason=unavailable)
        if context is None:
            context = PlanContext.start(candidates, cards_per_member=member.gpu_required, members=len(members),
                                        config=framework.config, one_per_node=group.one_per_node)
        candidates.sort(key=lambda node: (order(node, context), totals[node.id], -node.id), reverse=True)
        placed = _first_fitting(member, candidates, framework, scratch)
        if placed is None:
            summary = result.message
            if len(candidates) < len(feasible):
                summary += (f" {len(feasible) - len(candidates)} feasible node(s) already hold a member of this "
                            f"replica: its members take one node each.")
            return _incomplete(group, members, rank, member, summary, result.compact_diagnostics())
        node, cards = placed
        context.record(node)
        placements.append(MemberPlacement(rank, member, node.id, node.name, tuple(cards),
                                          getattr(cards, "card_type", "")))
    return GangPlan(group, placements, _describe(placements))


def common_gpu_type(members: list[TaskInfo]) -> str:
    """The one GPU type every member declares, or "" when they declare none or several."""
    types = {member.gpu_type for member in members}
    return types.pop() if len(types) == 1 else ""


def gpu_type_unavailable(gpu_type: str, result: ScheduleResult, snapshot: ClusterSnapshot) -> str:
    """Why no node of `gpu_type` can serve the gang at all right now ("" when some can), from the filters'
    rejections of its first member (`result`): the tenant filter's, or the availability filter's."""
    of_type = [node for node in snapshot.nodes if gpu_type in node.gpu_types]
    if not of_type:
        return f"no {gpu_type} node in the cluster"
    refused_by = Counter(getattr(result.rejection(node.id), "plugin", "") for node in of_type)
    if refused_by[tenant_filter.NAME] == len(of_type):
        return (f"no {gpu_type} node within the tenant's reach: {len(of_type)} "
                f"{tenant_filter.DEDICATED_OTHER_TENANT}")
    if refused_by[availability.NAME] + refused_by[tenant_filter.NAME] == len(of_type):
        return f"no {gpu_type} node available now: {refused_by[availability.NAME]} offline or cordoned"
    return ""


def _first_fitting(member: TaskInfo, candidates: list[NodeInfo], framework: Framework,
                   scratch: "_Scratch") -> tuple[NodeInfo, list[int]] | None:
    for node in candidates:
        cards = framework.reserve(member, node, scratch.snapshot.tenancy)
        if cards or (member.gpu_required == 0 and not member.is_fractional):
            owned = scratch.own(node)
            apply_bind(scratch.snapshot, member, owned, cards)
            return owned, cards
    return None


def _incomplete(group: GroupInfo, members: list[TaskInfo], rank: int, member: TaskInfo, summary: str,
                nodes: dict[str, Any]) -> GangFailure:
    message = (f"gang {group.name}: member rank {rank} (task {member.id}) found no place after {rank} of "
               f"{len(members)} members: {summary}")
    return GangFailure(group, reasons.GANG_INCOMPLETE, message, rank=rank, task_id=member.id, reason=summary,
                       nodes=nodes)


def _describe(placements: list[MemberPlacement]) -> str:
    ranks_by_node: dict[str, list[int]] = {}
    for placement in placements:
        ranks_by_node.setdefault(placement.node_name, []).append(placement.rank)
    parts = ", ".join(f"{name} (ranks {_span(ranks)})" for name, ranks in ranks_by_node.items())
    return f"{len(placements)} members on {len(ranks_by_node)} nodes: {parts}"


def _span(ranks: list[int]) -> str:
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 1:
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(map(str, ranks))


class _Scratch:
    """A copy-on-write view of the snapshot: a node is cloned the first time a simulated bind changes it, so the
    cycle's snapshot stays untouched and planning costs a copy of the nodes it uses, not of the cluster."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = ClusterSnapshot(nodes=list(snapshot.nodes), tenancy=snapshot.tenancy)
        self._position = {node.id: position for position, node in enumerate(self.snapshot.nodes)}
        self._current = {node.id: node for node in self.snapshot.nodes}
        self._owned: set[int] = set()

    def node(self, node_id: int) -> NodeInfo | None:
        return self._current.get(node_id)

    def own(self, node: NodeInfo) -> NodeInfo:
        if node.id in self._owned:
            return node
        clone = replace(node, labels=dict(node.labels), cache={},
                        cards=[replace(card, occupant_tenants=set(card.occupant_tenants)) for card in node.cards])
        self.snapshot.nodes[self._position[node.id]] = clone
        self._current[node.id] = clone
        self._owned.add(node.id)
        # The framework's table (same node list) refreshes this row when apply_bind records the clone's bind.
        return clone
