"""The defragmentation plan (design §16.3), pure: snapshot and movable tasks in, moves out.

For a reserved job that finds no node, the plan is the fewest moves of movable tasks (running, preemptible batch
work: the caller says which) off one node that may hold the job, such that each moved task fits on another node now
and the job then fits on the emptied node. Of the NODES_PER_PLAN nodes with the most free cards for it, nodes are
tried in order of the fewest moves that could free enough cards (counted from card occupancy alone, no filter run);
on each, the sets of that size and up to `max_moves` that free enough cards are checked with the framework: the
movers are taken off the node, each is placed as a cycle would place it (best node other than the one being
emptied, the earlier movers already on their targets), and the job's filter chain is run on the emptied node.
Everything is undone afterwards: the snapshot is left as it was. Among equally short plans: fewest cards moved, then
smallest priority sum, then node id.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

from scheduling.framework.cards import card_groups, cards_by_key
from scheduling.framework.framework import Framework
from scheduling.framework.occupancy import Occupant, assume, forget, node_changed, occupied_cards
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, TaskInfo

# Movers considered per node (those holding the most cards of the job's type): beyond this the subsets explode.
MOVERS_PER_NODE = 12
# Sets checked with the framework per plan, over all nodes: a plan must stay cheap on a cycle at 5,000 nodes.
CHECKS_PER_PLAN = 40
# Nodes whose sets are counted at all: those with the most free cards of the job's kind (closest to fitting it).
NODES_PER_PLAN = 16


@dataclass(frozen=True)
class Mover:
    """A task that may be moved: as the framework places it (`task`), where it runs and what it holds there."""

    task: TaskInfo
    node_id: int
    occupant: Occupant


@dataclass(frozen=True)
class Move:
    task: TaskInfo
    from_node: NodeInfo
    to_node: NodeInfo
    cards: Sequence[int]    # as Reserve chose them (their card type included)


@dataclass(frozen=True)
class DefragPlan:
    job: TaskInfo
    node: NodeInfo
    moves: tuple[Move, ...]
    frees: int   # cards of the job's type the moves free on `node`

    @property
    def rank(self) -> tuple[int, int, int, int]:
        return (len(self.moves), sum(move.task.gpu_required for move in self.moves),
                sum(move.task.priority for move in self.moves), self.node.id)


def plan_defrag(job: TaskInfo, snapshot: ClusterSnapshot, movers: Iterable[Mover], framework: Framework, *,
                max_moves: int) -> DefragPlan | None:
    """The shortest plan that lets `job` fit, or None (nothing is to be moved)."""
    if max_moves < 1 or job.gpu_required < 1:
        return None
    on_node: dict[int, list[Mover]] = {}
    for mover in movers:
        if mover.task.id != job.id:
            on_node.setdefault(mover.node_id, []).append(mover)
    could_hold = framework.once_emptied(snapshot)
    closest = []
    for node_id in on_node:
        node = snapshot.node(node_id)
        if node is None or not could_hold(job, node):
            continue
        frees = [sum(card.is_free for card in group) for _, group in card_groups(job, node)
                 if len(group) >= job.gpu_required]
        if frees:
            closest.append((-max(frees), node.id, node))
    options = []
    for _, _, node in sorted(closest)[:NODES_PER_PLAN]:
        for size, sets in _freeing_sets(job, node, on_node[node.id], max_moves):
            options.append((size, node.id, node, sets))
    options.sort(key=lambda option: option[:2])
    best: DefragPlan | None = None
    checks = 0
    for size, _, node, sets in options:
        if best is not None and size > len(best.moves):
            break
        for chosen in sets:
            if checks >= CHECKS_PER_PLAN:
                return best
            checks += 1
            moves = _check(job, snapshot, node, chosen, framework)
            if moves is not None:
                plan = DefragPlan(job, node, moves, frees=job.gpu_required)
                if best is None or plan.rank < best.rank:
                    best = plan
                break
    return best


def _freeing_sets(job: TaskInfo, node: NodeInfo, movers: list[Mover], max_moves: int):
    """Per set size (smallest first), the sets of `movers` whose leaving frees enough cards of one of the job's card
    groups on `node`, fewest cards moved first; only sizes that have some."""
    by_key = cards_by_key(node)
    found: dict[int, list[tuple[tuple, tuple[Mover, ...]]]] = {}
    for _, group in card_groups(job, node):
        if len(group) < job.gpu_required:
            continue
        in_group = {id(card) for card in group}
        need = job.gpu_required - sum(card.is_free for card in group)
        if need <= 0:
            continue
        holding = []
        for mover in movers:
            held = [card for card in occupied_cards(node, mover.occupant, by_key) if id(card) in in_group]
            if held:
                holding.append((mover, held))
        holding.sort(key=lambda item: (-len(item[1]), item[0].task.priority, item[0].task.id))
        holding = holding[:MOVERS_PER_NODE]
        for size in range(1, min(max_moves, len(holding)) + 1):
            for chosen in combinations(holding, size):
                if _freed(chosen) >= need:
                    movers_of = tuple(mover for mover, _ in chosen)
                    key = (sum(m.task.gpu_required for m in movers_of), sum(m.task.priority for m in movers_of))
                    found.setdefault(size, []).append((key, movers_of))
    for size in sorted(found):
        yield size, [movers for _, movers in sorted(found[size], key=lambda item: item[0])]


def _freed(chosen: Sequence[tuple[Mover, list]]) -> int:
    """Cards every occupant of which is among the chosen (a shared card frees only when all its shards leave)."""
    leaving: dict[int, int] = {}
    cards = {}
    for _, held in chosen:
        for card in held:
            leaving[id(card)] = leaving.get(id(card), 0) + 1
            cards[id(card)] = card
    return sum(1 for key, count in leaving.items() if cards[key].active_tasks <= count)


def _check(job: TaskInfo, snapshot: ClusterSnapshot, node: NodeInfo, chosen: Sequence[Mover],
           framework: Framework) -> tuple[Move, ...] | None:
    """The moves, when every mover has a target and the job then fits on `node`; the snapshot is restored."""
    undo: list = []
    try:
        for mover in chosen:
            forget(node, mover.occupant)
            undo.append((assume, node, mover.occupant))
        node_changed(snapshot, node)
        moves = []
        # The biggest first: it has the fewest places to go.
        for mover in sorted(chosen, key=lambda m: (-m.task.gpu_required, m.task.id)):
            rng = random.Random(mover.task.id)
            result = framework.schedule(mover.task, snapshot, rng)
            if result.node is None:
                return None
            target = next((snapshot.node(node_id) for node_id in result.ranked_node_ids() if node_id != node.id),
                          None)
            if target is None:
                return None
            cards = framework.reserve(mover.task, target, snapshot.tenancy)
            if (mover.task.gpu_required or mover.task.is_fractional) and not cards:
                return None
            placed = Occupant.of_task(mover.task, cards)
            assume(target, placed)
            node_changed(snapshot, target)
            undo.append((forget, target, placed))
            moves.append(Move(mover.task, node, target, cards))
        alone = ClusterSnapshot(nodes=[node], tenancy=snapshot.tenancy)
        if framework.schedule(job, alone, random.Random(job.id)).node is None:
            return None
        return tuple(moves)
    finally:
        for action, where, occupant in reversed(undo):
            action(where, occupant)
            node_changed(snapshot, where)
