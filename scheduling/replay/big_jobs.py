"""Reservation and defragmentation in the dynamic replay (design §16.3; `replay_trace --dynamic --reserve-after S
[--defrag]`), with the production code: `queue.reservation.closest_node` picks the node, `queue.nomination.HeldCards`
holds its free cards for the job during each pass (other tasks read `Reserved` there, the reservation plugin), and
`preemption.defrag_planner.plan_defrag` plans the moves.

As a cycle does: each pass (a moment of the replay) starts by choosing, if there is none, the reserved job — the
oldest waiting task of at least 2 cards that has waited `reserve_after` seconds (trace tasks share one priority and
one GPU type, so there is one at a time) — keeping its node while it may still hold it and no other node has
strictly more free cards for it, and holding that node's room for it (`HeldCards`: free cards, cards only shards
occupy, host CPU and memory); the job sees them on its own attempt; the holds end with the pass. When the job still
waits after the pass, defrag (if on, at most once a minute of replay time for the job, within `moves_per_hour` evictions over the
last hour of replay time) plans the moves. Every placed trace task counts as preemptible batch work (a trace says
nothing of it). A move is carried out at once: the task leaves its node and starts again from the beginning on its
target (a preempted batch task restarts: it runs its whole run time again), then the job is placed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from scheduling.framework.occupancy import Occupant
from scheduling.framework.snapshot import TaskInfo
from scheduling.plugins.defrag import DEFAULT_MAX_MOVES, DEFAULT_MOVES_PER_HOUR
from scheduling.preemption.defrag_planner import Mover, plan_defrag
from scheduling.queue.nomination import HeldCards
from scheduling.queue.reservation import MIN_CARDS, closer_node, closest_node, most_free_first
from scheduling.replay.simulate import Placed, Replay

# A waiting reserved job is offered defrag at most this often (a cycle retries a parked task within a minute).
DEFRAG_EVERY_SECONDS = 60.0
HOUR = 3600.0


@dataclass(frozen=True)
class DefragSettings:
    max_moves: int = DEFAULT_MAX_MOVES
    moves_per_hour: int = DEFAULT_MOVES_PER_HOUR


@dataclass
class Moved:
    old: Placed
    new: Placed


@dataclass
class BigJobs:
    replay: Replay
    reserve_after: float
    defrag: DefragSettings | None = None
    reserved: TaskInfo | None = None
    node_id: int | None = None
    held: HeldCards = field(default_factory=HeldCards)
    evictions: deque = field(default_factory=deque)   # replay times of the moves of the last hour
    moves: int = 0
    reservations: int = 0
    _defrag_tried_at: float = -HOUR

    def before_pass(self, waiting_since: dict[int, tuple[TaskInfo, float]], moment: float) -> None:
        """Choose the reserved job if there is none (`waiting_since`: waiting task id → (task, arrival)) and hold
        its node's free cards."""
        snapshot = self.replay.snapshot
        if self.reserved is not None and self.reserved.id not in waiting_since:
            self.reserved = self.node_id = None
        if self.reserved is None:
            due = [(arrived, task.id, task) for task, arrived in waiting_since.values()
                   if task.gpu_required >= MIN_CARDS and moment - arrived >= self.reserve_after]
            if due:
                self.reserved = min(due)[2]
                self.reservations += 1
                self._defrag_tried_at = -HOUR
        if self.reserved is None:
            return
        node = snapshot.node(self.node_id) if self.node_id is not None else None
        could_hold = self.replay.framework.once_emptied(snapshot)
        if node is None or not could_hold(self.reserved, node):
            node = closest_node(self.reserved, could_hold, order=most_free_first(snapshot))
            self.node_id = node.id if node is not None else None
        elif (closer := closer_node(self.reserved, node.id, snapshot, could_hold)) is not None:
            self.node_id = closer.id
        if self.node_id is not None:
            self.held = HeldCards()
            self.held.hold(self.reserved, self.node_id, snapshot, reserved=True)

    def is_reserved(self, task: TaskInfo) -> bool:
        return self.reserved is not None and task.id == self.reserved.id

    def release(self, task: TaskInfo) -> None:
        self.held.release_for(task, self.replay.snapshot)

    def restore(self, task: TaskInfo) -> None:
        self.held.restore_for(task, self.replay.snapshot)

    def after_pass(self, placed_now: list[Placed], moment: float) -> tuple[list[Moved], Placed | None]:
        """End the pass's holds; when the reserved job still waits, defrag's moves and the job's placement."""
        job = self.reserved
        if job is not None:
            self.held.release_for(job, self.replay.snapshot)
        self.held = HeldCards()
        if job is not None and any(placed.task.id == job.id for placed in placed_now):
            self.reserved = self.node_id = None
            return [], None
        if job is None or self.defrag is None or moment - self._defrag_tried_at < DEFRAG_EVERY_SECONDS:
            return [], None
        self._defrag_tried_at = moment
        while self.evictions and self.evictions[0] <= moment - HOUR:
            self.evictions.popleft()
        left = self.defrag.moves_per_hour - len(self.evictions)
        if left <= 0:
            return [], None
        movers = [Mover(placed.task, placed.node.id, Occupant.of_task(placed.task, placed.cards))
                  for placed in placed_now]
        plan = plan_defrag(job, self.replay.snapshot, movers, self.replay.framework,
                           max_moves=min(self.defrag.max_moves, left))
        if plan is None:
            return [], None
        by_task = {placed.task.id: placed for placed in placed_now}
        olds = [by_task[move.task.id] for move in plan.moves]
        for old in olds:
            self.replay.release(old)
        moved = [Moved(old, self.replay.bind(move.task, move.to_node, move.cards))
                 for old, move in zip(olds, plan.moves)]
        self.evictions.extend([moment] * len(moved))
        self.moves += len(moved)
        return moved, self.replay.place(job)
