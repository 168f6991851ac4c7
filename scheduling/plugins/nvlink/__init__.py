"""nvlink: NVLink-aware placement for multi-card tasks (design §6).

The node label `heteroflow.io/gpu-topology` (written by the agent, grammar in `nodes.topology_label`) gives NVLink
pairs and each card's NUMA node; NVLink domains are its connected components. Only FREE cards (no active occupant,
memory under the threshold) count. A node's score for a k-card task (k ≥ 2) is that of its best k-card group:

    50, +50 the group lies in one domain, +30 it fills that domain exactly, +40 every card of the domain is free,
    −20 instead of +50 when it must span domains; +15 when the k cards can sit on one NUMA node, −10 when they
    cannot and every candidate card's NUMA node is known (unknown NUMA adds nothing).

Filter: with task label `nvlink: required`, a node whose largest set of free cards inside one domain is smaller
than k is removed. No topology data, or a task of fewer than 2 cards ⇒ score 50 and pass.
Group scores are cached per table row and recomputed only for rows an in-memory bind changed.

Per card group (design §15.3): the label describes a node's NVIDIA cards (`LABELLED_CARD_TYPE`; on a node of one type
without types reported, all its cards). So a domain never spans vendors, only those cards count as free, and a task
of another GPU type is scored as on a node without topology data (50, passes, default card choice).

Reserve (design §5.3), for a whole-card task on a node with topology data: the smallest NVLink domain (fewest free
cards, then fewest cards) that holds the task, preferring one whose free cards fit on one NUMA node; inside it the
tightest NUMA node that fits, lowest indexes first. If no domain fits, cards are taken from the domains with most
free cards first so the task spans as few domains as possible. Without topology data it leaves the choice to the
framework's default.

The rest of HeteroFlow uses `SPEC` and `best_group_score` (the gang planner's tensor path); the rest is nvlink's own.
"""

from collections import Counter
from functools import lru_cache

import numpy as np

from nodes.topology_label import LABELLED_CARD_TYPE, TOPOLOGY_LABEL, decode_label, nvlink_domains
from scheduling.framework.cards import card_type_of
from scheduling.framework.interfaces import CycleState, RowPlugin, label_is
from scheduling.framework.equivalence import EVERY_ROW_PASSES
from scheduling.framework.reserve import whole_card_candidates
from scheduling.framework.registry import FILTER, RESERVE, SCORE, PluginSetting, PluginSpec
from scheduling.framework.settings_schema import no_settings
from scheduling.framework.snapshot import CardInfo, NodeInfo, SchedulerConfig, TaskInfo
from scheduling.framework.table import NodeTable

NAME = "nvlink"
NVLINK_REQUIRED = "no free NVLink domain large enough"
NEUTRAL = 50.0


class NodeTopology:
    """Decoded label: NVLink domains (sorted card lists) and card → NUMA node (None when unknown)."""

    __slots__ = ("domains", "numa")

    def __init__(self, domains: list[list[int]], numa: dict[int, int | None]) -> None:
        self.domains = domains
        self.numa = numa


@lru_cache(maxsize=4096)
def _decode(text: str) -> NodeTopology | None:
    # Nodes of one model share one label text, so decoding is paid once per distinct text, across cycles too.
    decoded = decode_label(text)
    if decoded is None:
        return None
    return NodeTopology(nvlink_domains(decoded), dict(decoded.numa))


def node_topology(node: NodeInfo) -> NodeTopology | None:
    text = node.labels.get(TOPOLOGY_LABEL)
    return _decode(text) if text else None


_DESCRIBED_TYPES = frozenset({LABELLED_CARD_TYPE, ""})


def is_described(card: CardInfo, node: NodeInfo) -> bool:
    """Whether the topology label speaks of `card` (an NVIDIA card, or a card of no reported type)."""
    return card_type_of(card, node) in _DESCRIBED_TYPES


def takes_described_cards(task: TaskInfo) -> bool:
    """Whether the task's cards can be ones the label describes: it asks for NVIDIA cards or names no type."""
    return task.gpu_type in _DESCRIBED_TYPES


def free_cards(node: NodeInfo, config: SchedulerConfig) -> set[int]:
    return {card.index for card in node.cards
            if is_described(card, node) and card.is_free and not config.card_overloaded(card)}


def _numa_bonus(cards: list[int], numa: dict[int, int | None], k: int) -> float:
    per_node = Counter(numa.get(card) for card in cards)
    if any(count >= k for node, count in per_node.items() if node is not None):
        return 15.0
    return -10.0 if None not in per_node else 0.0


def group_score(topology: NodeTopology, free: set[int], k: int) -> float:
    """The score of the best k-card group of free cards (module docstring); 50 when k < 2 or too few free cards."""
    if k < 2:
        return NEUTRAL
    best = None
    for domain in topology.domains:
        free_in_domain = [card for card in domain if card in free]
        if len(free_in_domain) < k:
            continue
        score = NEUTRAL + 50
        if len(domain) == k:
            score += 30
        if len(free_in_domain) == len(domain):
            score += 40
        score += _numa_bonus(free_in_domain, topology.numa, k)
        best = score if best is None else max(best, score)
    if best is not None:
        return best
    all_free = [card for domain in topology.domains for card in domain if card in free]
    if len(all_free) < k:
        return NEUTRAL
    return NEUTRAL - 20 + _numa_bonus(all_free, topology.numa, k)


def best_group_score(node: NodeInfo, config: SchedulerConfig, k: int) -> float:
    """The score of the node's best k-card group (NEUTRAL without topology data)."""
    topology = node_topology(node)
    if topology is None:
        return NEUTRAL
    return group_score(topology, free_cards(node, config), k)


def largest_free_domain(topology: NodeTopology, free: set[int]) -> int:
    return max((sum(card in free for card in domain) for domain in topology.domains), default=0)


@lru_cache(maxsize=65536)
def _row_value(text: str, free_bits: int, key: int | str) -> float:
    # Keyed by label text and free set: a cluster has few node models and most nodes are empty or full, so a
    # 5,000-node snapshot computes a handful of distinct groups, not 5,000.
    topology = _decode(text)
    if topology is None:
        return np.nan
    free = {card for domain in topology.domains for card in domain if free_bits >> card & 1}
    return largest_free_domain(topology, free) if key == LARGEST else group_score(topology, free, key)


LARGEST = "largest"


class Nvlink(RowPlugin):
    name = NAME
    reasons = (NVLINK_REQUIRED,)
    resolvable = frozenset(reasons)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        if not _nvlink_required(task):
            return np.zeros(len(rows), np.int8)
        # NaN (no topology data) compares False: the node passes.
        return (self._per_row(table, rows, LARGEST) < task.gpu_required).astype(np.int8)

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        if not _nvlink_required(task):
            return EVERY_ROW_PASSES
        return (task.gpu_required,)

    def score_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return (max(task.gpu_required, 1) if takes_described_cards(task) else 0,)

    def score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        if task.gpu_required < 2 or not takes_described_cards(task):
            return np.full(len(rows), NEUTRAL)
        scores = self._per_row(table, rows, task.gpu_required)
        return np.where(np.isnan(scores), NEUTRAL, scores)

    def reserve(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> list[int] | None:
        if task.gpu_required <= 0:
            return None
        topology = node_topology(node)
        # On a mixed node the framework offers one card group at a time: NVLink data speaks of NVIDIA cards only.
        if topology is None or not all(is_described(card, node) for card in node.cards):
            return None
        candidates = whole_card_candidates(task, node, state.config)
        if len(candidates) < task.gpu_required:
            return []
        return _nvlink_cards({card.index for card in candidates}, topology, task.gpu_required)

    @staticmethod
    def _per_row(table: NodeTable, rows: np.ndarray, key: int | str) -> np.ndarray:
        cache = table.plugin_cache.setdefault(NAME, {})
        if key not in cache:
            cache[key] = (np.full(table.size, np.nan), np.full(table.size, -1, np.int64))
        values, versions = cache[key]
        stale = rows[versions[rows] != table.row_version[rows]]
        if len(stale):
            for row, bits in zip(stale.tolist(), table.free_card_bits(stale).tolist()):
                node = table.nodes[row]
                text = node.labels.get(TOPOLOGY_LABEL)
                # The table's bitmask counts every card; only a node of described cards alone may use it.
                if bits < 0 or not (table.uniform_cards[row] and node.cards and is_described(node.cards[0], node)):
                    bits = sum(1 << card for card in free_cards(node, table.config) if card < 63)
                values[row] = _row_value(text, bits, key) if text else np.nan
            versions[stale] = table.row_version[stale]
        return values[rows]


def _nvlink_required(task: TaskInfo) -> bool:
    return task.gpu_required >= 2 and takes_described_cards(task) and label_is(task.labels, "nvlink", "required")


def factory(setting: PluginSetting) -> Nvlink:
    return Nvlink()


def _nvlink_cards(free: set[int], topology: NodeTopology, k: int) -> list[int]:
    fitting = []
    for domain in topology.domains:
        free_in_domain = [card for card in domain if card in free]
        if len(free_in_domain) >= k:
            numa_groups = _numa_groups(free_in_domain, topology.numa, k)
            fitting.append((len(free_in_domain), len(domain), not numa_groups, domain[0], free_in_domain, numa_groups))
    if fitting:
        *_, free_in_domain, numa_groups = min(fitting, key=lambda entry: entry[:4])
        if numa_groups:
            return sorted(min(numa_groups, key=lambda group: (len(group), group[0]))[:k])
        return free_in_domain[:k]
    chosen: list[int] = []
    by_size = sorted(([c for c in domain if c in free] for domain in topology.domains), key=lambda d: (-len(d), d))
    for free_in_domain in by_size:
        chosen.extend(free_in_domain[: k - len(chosen)])
    # Free cards the label does not mention (a card added after the label was written) come last.
    chosen.extend(sorted(free - set(chosen))[: k - len(chosen)])
    return sorted(chosen)


def _numa_groups(cards: list[int], numa: dict[int, int | None], k: int) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for card in cards:
        if numa.get(card) is not None:
            groups.setdefault(numa[card], []).append(card)
    return [group for group in groups.values() if len(group) >= k]


SPEC = PluginSpec(NAME, factory, default=PluginSetting(NAME, True, 1), kinds=frozenset({FILTER, SCORE, RESERVE}),
                  settings_schema=no_settings(),
                  description="Prefers card groups inside one NVLink domain and picks the cards there; the task "
                              "label nvlink: required makes it a filter.")
