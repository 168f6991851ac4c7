"""Which running work to evict so that a higher-priority task fits (design §9). Pure: snapshot in, plan out.

"Fits" is decided by the node's own filter chain run on a copy of the node with the victims' resources given back,
so every hard rule of a normal attempt (NVLink `required`, `gpu-model`, the preemptor's tenant-sharing boundary,
dedicated nodes) holds for the plan as well.

A victim's cards help only if they are in one of the preemptor's card groups (`cards.card_groups`: its GPU type, its
model when it asks for one): on a node with cards of several vendors the plan is searched per card group, with the
victims of that group alone, so work on cards the preemptor could never use is never evicted.
"""

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from scheduling import lifecycle
from scheduling.framework.cards import card_groups, cards_by_key
from scheduling.framework.occupancy import forget, occupied_cards
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, TaskInfo
from scheduling.framework.status import Status
from scheduling.models import TaskType
from scheduling.preemption.candidates import NEVER_VICTIM_TYPES, ActiveTask

# The victim states each preempt_stage (the preempt plugin's STAGES) allows.
VICTIM_STATES: dict[str, frozenset[str]] = {
    "disabled": frozenset(),
    "scheduled": frozenset({lifecycle.SCHEDULED, lifecycle.RUNNING}),
    "running": frozenset({lifecycle.RUNNING}),
}

NO_VICTIMS_FOUND = "no preemption victims found"
NO_VICTIM_ON_ITS_CARDS = "no eligible victim holds cards of its type"

FitCheck = Callable[[TaskInfo, NodeInfo], Status]


@dataclass(frozen=True)
class PreemptionPlan:
    node_id: int
    node_name: str
    victims: tuple[ActiveTask, ...]
    # A reclaim (design §16.2): the victims are work the cohort's other tenants borrow.
    reclaim: bool = False

    @property
    def priority_sum(self) -> int:
        return sum(victim.priority for victim in self.victims)

    @property
    def rank(self) -> tuple[int, int, int]:
        return len(self.victims), self.priority_sum, self.node_id


@dataclass(frozen=True)
class PlanSearch:
    """The chosen plan, or None with the reason each node could not be freed for the task."""

    plan: PreemptionPlan | None
    node_reasons: dict[str, str] = field(default_factory=dict)

    @property
    def failure_message(self) -> str:
        """`no preemption victims found: 16 nodes: no eligible victims; 1 node: …` — one line, reasons counted;
        each node's own reason stays in `node_reasons` for the diagnostics."""
        counted = Counter(self.node_reasons.values())
        reasons = "; ".join(
            f"{count} {'node' if count == 1 else 'nodes'}: {reason}"
            for reason, count in sorted(counted.items(), key=lambda item: (-item[1], item[0]))
        ) or "no nodes"
        return f"{NO_VICTIMS_FOUND}: {reasons}."


def may_preempt(task: TaskInfo) -> bool:
    """Training never preempts (design §9); batch and inference may."""
    return task.type != TaskType.TRAINING


def ineligibility(victim: ActiveTask, *, preemptor: TaskInfo, preempt_stage: str,
                  reclaim_from: frozenset[int] | None = None) -> str | None:
    """Why `victim` may not be evicted for `preemptor`, or None when all four rules of design §9 allow it. A
    reclaim (`reclaim_from`: the tenants whose borrowed work it may evict, design §16.2) takes only their borrowed
    tasks, whatever their priority."""
    if victim.type in NEVER_VICTIM_TYPES:
        return f"{victim.type} tasks are never preempted"
    if not victim.preemptible:
        return "not preemptible"
    if reclaim_from is not None:
        if not victim.borrowed or victim.tenant_id not in reclaim_from:
            return "not borrowed from the cohort"
    elif victim.priority >= preemptor.priority:
        # The victim's own priority is not named: it may be another tenant's task.
        return f"priority not lower than {preemptor.priority}"
    if victim.status not in VICTIM_STATES.get(preempt_stage, frozenset()):
        return f"{victim.status} tasks are not preempted at preempt_stage {preempt_stage}"
    return None


def eviction_order(victim: ActiveTask) -> tuple:
    """Lowest priority first, then the youngest (it has lost the least work), then id for a total order."""
    return victim.priority, -victim.created_at.timestamp(), victim.id


def plan_preemption(task: TaskInfo, snapshot: ClusterSnapshot, candidates: Iterable[ActiveTask],
                    fit_check: FitCheck, preempt_stage: str,
                    unresolvable: Mapping[int, str] | None = None,
                    reclaim_from: frozenset[int] | None = None) -> PlanSearch:
    """Per node, the shortest prefix of eligible victims that makes `task` fit; the best such node overall.

    Best: fewest victims, then smallest priority sum, then node id. No feasible node ⇒ no plan, nobody is evicted.
    `unresolvable` (node id → why the normal attempt passed it over, for the nodes that no eviction can cure: wrong
    GPU type, offline, dedicated elsewhere) lets them be skipped without re-running their filters.
    """
    unresolvable = unresolvable or {}
    on_node: dict[int, list[ActiveTask]] = defaultdict(list)
    for candidate in candidates:
        on_node[candidate.node_id].append(candidate)

    best: PreemptionPlan | None = None
    reasons: dict[str, str] = {}
    for node in sorted(snapshot.nodes, key=lambda node: node.id):
        incurable = unresolvable.get(node.id)
        if incurable is not None:
            reasons[node.name] = f"preemption would not help ({incurable})"
            continue
        occupants = on_node.get(node.id)
        if not occupants:
            reasons[node.name] = "no eligible victims"
            continue
        eligible = sorted(
            (v for v in occupants
             if ineligibility(v, preemptor=task, preempt_stage=preempt_stage, reclaim_from=reclaim_from) is None),
            key=eviction_order,
        )
        if not eligible:
            reasons[node.name] = "no eligible victims"
            continue
        node_best: PreemptionPlan | None = None
        shortfall = None
        for victims in victims_per_card_group(task, node, eligible):
            # Evicting more only frees more, so a group that all its victims cannot free is skipped at once.
            status = fit_check(task, _released(node, victims, occupants))
            if not status.is_success:
                shortfall = f"all {len(victims)} eligible victims would not be enough ({status.reason})"
                continue
            prefix = next(
                count for count in range(1, len(victims) + 1)
                if count == len(victims) or fit_check(task, _released(node, victims[:count], occupants)).is_success
            )
            plan = PreemptionPlan(node_id=node.id, node_name=node.name, victims=tuple(victims[:prefix]),
                                  reclaim=reclaim_from is not None)
            if node_best is None or plan.rank < node_best.rank:
                node_best = plan
        if node_best is None:
            reasons[node.name] = shortfall or NO_VICTIM_ON_ITS_CARDS
            continue
        if best is None or node_best.rank < best.rank:
            best = node_best
    return PlanSearch(plan=best, node_reasons={} if best else reasons)


def victims_per_card_group(task: TaskInfo, node: NodeInfo, eligible: list[ActiveTask]) -> list[list[ActiveTask]]:
    """Per card group of `node` the task may take from, the eligible victims (in eviction order) that can help it
    there: those holding a card of that group (whole, or a shard on one) and those holding no card at all, whose
    host CPU and memory every group needs. A task that needs no card may be helped by any victim."""
    if task.gpu_required <= 0 and not task.is_fractional:
        return [eligible]
    cards = cards_by_key(node)
    per_group = []
    for _, group in card_groups(task, node):
        in_group = {id(card) for card in group}
        helping = [victim for victim in eligible if not victim.cards
                   or any(id(card) in in_group for card in occupied_cards(node, victim.occupant, cards))]
        if helping:
            per_group.append(helping)
    return per_group


def _released(node: NodeInfo, victims: list[ActiveTask], occupants: list[ActiveTask]) -> NodeInfo:
    """A copy of `node` as it would be once `victims` stopped; the snapshot itself is left untouched."""
    freed = replace(
        node,
        cards=[replace(card, occupant_tenants=set(card.occupant_tenants)) for card in node.cards],
        cache={},
    )
    victim_ids = {victim.id for victim in victims}
    staying = [task.occupant for task in occupants if task.id not in victim_ids]
    cards = cards_by_key(freed)
    for victim in victims:
        # The reported figures are not occupancy: what the victim used of them leaves with it (the agent's next
        # report confirms).
        if freed.cpu_cores:
            freed.cpu_percent = max(freed.cpu_percent - 100.0 * victim.cpu_cores / freed.cpu_cores, 0.0)
        freed.memory_used_mb = max(freed.memory_used_mb - victim.memory_mb, 0)
        for card in forget(freed, victim.occupant, staying=staying, cards=cards):
            if victim.is_shard:
                card.memory_used_mb = max(card.memory_used_mb - victim.shard_memory_mb, 0)
            if card.is_free:
                card.memory_used_mb = 0
                card.utilization = 0.0
    return freed
