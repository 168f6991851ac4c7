"""The five parallelism paths of a training gang: how the gang planner orders candidate nodes.

Every path sees the same candidates — the nodes the framework's filters pass for the next member on the simulated
snapshot — and returns a sort key, larger is better; `plan_gang` tries the nodes in that order. The shared notions:

- topology affinity of two nodes: same node 4 > same rack 3 > same zone 2 > elsewhere 0 (a soft preference);
- capacity: how many more members of the group's shape a node can take (free usable cards // cards per member),
  summed per rack, zone and network domain so that the first member lands where the whole gang can follow.

Paths:
- `coschedule`: plain gang — close to the nodes already chosen, filling a node before opening the next.
- `data`: like coschedule, but one network domain first (NCCL over internal addresses, `network.py`).
- `tensor`: each member's cards inside one NVLink domain when topology data says where (nvlink plugin's score).
- `greedy`: fewest nodes — the chosen node while it has room, then the node with most free capacity.
- `pipeline`: consecutive ranks on the same or the next node of the same rack, then zone; nodes walked in
  (region, zone, rack, name) order so stage k+1 sits next to stage k.
"""

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scheduling.framework.snapshot import NodeInfo, SchedulerConfig
from scheduling.groups.network import NodeAddress, network_domain
from scheduling.models import Parallelism
from scheduling.plugins import nvlink

SAME_NODE, SAME_RACK, SAME_ZONE, ELSEWHERE = 4, 3, 2, 0
# A member that needs no card is bounded by nothing the planner counts.
UNBOUNDED = 1 << 30


def topology_affinity(a: NodeInfo, b: NodeInfo) -> int:
    if a.id == b.id:
        return SAME_NODE
    if a.rack and (a.region, a.zone, a.rack) == (b.region, b.zone, b.rack):
        return SAME_RACK
    if a.zone and (a.region, a.zone) == (b.region, b.zone):
        return SAME_ZONE
    return ELSEWHERE


def member_slots(node: NodeInfo, cards_per_member: int, config: SchedulerConfig) -> int:
    """How many members needing `cards_per_member` whole cards `node` can take now (ledger and usable cards)."""
    if cards_per_member <= 0:
        return UNBOUNDED
    usable = sum(1 for card in node.cards if card.is_free and not config.card_overloaded(card))
    return min(usable, node.free_gpus) // cards_per_member


def rack_key(node: NodeInfo):
    return ("rack", node.region, node.zone, node.rack) if node.rack else ("node", node.id)


def zone_key(node: NodeInfo):
    return ("zone", node.region, node.zone) if node.zone else rack_key(node)


def domain_key(node: NodeInfo):
    """The node's network domain; a node nothing trustworthy places is a domain of its own."""
    address = NodeAddress(node_id=node.id, labels=node.labels, internal_ip=node.internal_ip, public_ip=node.public_ip)
    return network_domain(address) or f"node:{node.id}"


_NEIGHBOURHOODS: dict[str, Callable[[NodeInfo], object]] = {"rack": rack_key, "zone": zone_key, "domain": domain_key}


@dataclass
class PlanContext:
    """What the planner knows while it places one gang: the nodes chosen so far and the capacity left."""

    config: SchedulerConfig
    cards_per_member: int
    remaining: int
    capacity: dict[int, int]
    nodes: dict[int, NodeInfo]
    chosen: list[int] = field(default_factory=list)
    _keys: dict[str, dict[int, object]] = field(default_factory=dict)
    _sums: dict[str, Counter] = field(default_factory=dict)
    _walk: dict[int, int] = field(default_factory=dict)

    @classmethod
    def start(cls, candidates: Iterable[NodeInfo], *, cards_per_member: int, members: int,
              config: SchedulerConfig, one_per_node: bool = False) -> "PlanContext":
        """`one_per_node`: a node takes one member at most (a multi-node replica's, design §17.1)."""
        nodes = {node.id: node for node in candidates}
        most = 1 if one_per_node else UNBOUNDED
        context = cls(config=config, cards_per_member=cards_per_member, remaining=members,
                      capacity={node_id: min(member_slots(node, cards_per_member, config), most)
                                for node_id, node in nodes.items()},
                      nodes=nodes)
        for name, key_of in _NEIGHBOURHOODS.items():
            keys = context._keys[name] = {node_id: key_of(node) for node_id, node in nodes.items()}
            sums = context._sums[name] = Counter()
            for node_id, key in keys.items():
                sums[key] += context.capacity[node_id]
        walk = sorted(nodes.values(), key=lambda node: (node.region, node.zone, node.rack, node.name, node.id))
        context._walk = {node.id: position for position, node in enumerate(walk)}
        return context

    def record(self, node: NodeInfo) -> None:
        """One more member placed on `node`."""
        self.chosen.append(node.id)
        self.remaining -= 1
        if self.capacity.get(node.id, 0) > 0:
            self.capacity[node.id] -= 1
            for name, keys in self._keys.items():
                self._sums[name][keys[node.id]] -= 1

    def capacity_of(self, node: NodeInfo) -> int:
        return self.capacity.get(node.id, 0)

    def fits(self, node: NodeInfo, neighbourhood: str) -> bool:
        """Whether the node's rack / zone / network domain can still hold every member left to place."""
        key = self._keys[neighbourhood].get(node.id)
        return key is not None and self._sums[neighbourhood][key] >= self.remaining

    def affinity_to_chosen(self, node: NodeInfo) -> int:
        return max((topology_affinity(node, self.nodes[node_id]) for node_id in set(self.chosen)), default=ELSEWHERE)

    def affinity_to_previous(self, node: NodeInfo) -> int:
        return topology_affinity(node, self.nodes[self.chosen[-1]]) if self.chosen else ELSEWHERE

    def on_chosen(self, node: NodeInfo) -> bool:
        return node.id in self.chosen

    def same_domain_as_master(self, node: NodeInfo) -> bool:
        if not self.chosen:
            return self.fits(node, "domain")
        return self._keys["domain"].get(node.id) == self._keys["domain"].get(self.chosen[0])

    def walk_position(self, node: NodeInfo) -> int:
        return self._walk.get(node.id, len(self._walk))


PathKey = Callable[[NodeInfo, PlanContext], tuple]


def coschedule_key(node: NodeInfo, context: PlanContext) -> tuple:
    return (context.affinity_to_chosen(node), context.fits(node, "rack"), context.fits(node, "zone"),
            context.capacity_of(node))


def data_key(node: NodeInfo, context: PlanContext) -> tuple:
    return (context.same_domain_as_master(node), *coschedule_key(node, context))


def tensor_key(node: NodeInfo, context: PlanContext) -> tuple:
    return (nvlink_score(node, context), *coschedule_key(node, context))


def greedy_key(node: NodeInfo, context: PlanContext) -> tuple:
    return (context.on_chosen(node), context.capacity_of(node), node.free_gpus)


def pipeline_key(node: NodeInfo, context: PlanContext) -> tuple:
    return (context.affinity_to_previous(node), context.fits(node, "rack"), context.fits(node, "zone"),
            -context.walk_position(node))


def nvlink_score(node: NodeInfo, context: PlanContext) -> float:
    """The nvlink plugin's score of the node's best card group for one member (50 without topology data)."""
    return nvlink.best_group_score(node, context.config, context.cards_per_member)


PATHS: dict[str, PathKey] = {
    Parallelism.TENSOR: tensor_key,
    Parallelism.DATA: data_key,
    Parallelism.GREEDY: greedy_key,
    Parallelism.COSCHEDULE: coschedule_key,
    Parallelism.PIPELINE: pipeline_key,
}


def path_key(parallelism: str) -> PathKey:
    return PATHS.get(parallelism, coschedule_key)
