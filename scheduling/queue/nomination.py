"""Nomination (design §15.1): a task that started a preemption is nominated on its node, and the cards there are held
for it — not given to lower-priority work — until its next attempt.

`Task.nominated_node` is written when the preemption starts (`nominate`) and cleared once the nominee's attempt ends
in anything but PreemptionPending (`settle`). Each cycle holds, on every nominated node, up to the nominee's card
count of the free cards of its type (`hold_nominated_cards`): the victims' cards are still counted as theirs while
they stop, so what is held grows as they free. Only the nominee sees its held cards again (`HeldCards.release_for`).
Fractional nominees hold nothing: a shard's room is memory on a card, not a card.

A reserved job (design §16.3, `scheduling.queue.reservation`) is a nominee too, whose nomination lasts until it
binds or leaves the queue; its held cards are marked on the node (`NodeInfo.reserved_cards`) so that the tasks they
are kept from read `Reserved`, and held again when its own attempt fails, so later tasks of the cycle cannot take them.
A task defrag moves (`scheduling.preemption.moves`) is nominated on its target while it is still `preempting`, so the
target's cards wait for it from the moment it is evicted.
"""

from dataclasses import dataclass, field

from django.db.models import Q

from scheduling import lifecycle
from scheduling.framework import reasons
from scheduling.framework.cards import card_groups, card_type_of
from scheduling.framework.occupancy import Occupant, assume, forget, node_changed
from scheduling.framework.snapshot import CardInfo, ClusterSnapshot, NodeInfo, TaskInfo
from scheduling.models import Task
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, task_info_from_row


@dataclass
class _Hold:
    node: NodeInfo
    occupants: list[Occupant]     # one per held card
    reserved: bool = False
    host: Occupant | None = None  # a reservation's host CPU cores and memory

    @property
    def everything(self) -> list[Occupant]:
        """What the hold books on its node: its cards, and its host share if it has one."""
        return [*self.occupants, self.host] if self.host is not None else self.occupants


@dataclass
class HeldCards:
    """The cards held this cycle, by nominee task id."""

    holds: dict[int, _Hold] = field(default_factory=dict)
    # Reserved jobs whose holds were released for their own attempt: node id by task id.
    released_reservations: dict[int, int] = field(default_factory=dict)

    def hold(self, task: TaskInfo, node_id: int, snapshot: ClusterSnapshot, *, reserved: bool = False) -> None:
        """Hold up to `task.gpu_required` free cards of its type on the node for it (after its own attempt too)."""
        node = snapshot.node(node_id)
        if node is None or task.gpu_required <= 0 or task.id in self.holds:
            return
        # The cards the framework would let it take (its card groups: type and gpu-model), lowest indexes first.
        groups = [group for _, group in card_groups(task, node)]
        free = [card for group in groups for card in group if card.is_free]
        cards = sorted(free, key=lambda card: card.index)[: task.gpu_required]
        if reserved:
            # A reservation keeps all of the job's room on its node, not only its free cards: cards that only
            # shards occupy take no new shard (they drain for it, where new shards kept one busy for hours), and
            # the node's free host CPU cores and memory, up to the job's, go to no task without cards either.
            shared = [card for group in groups for card in group if card.whole_card_tasks == 0 and card.shard_tasks]
            cards += sorted(shared, key=lambda card: card.index)[: task.gpu_required - len(cards)]
        held = [_held_for_nobody(node, card) for card in cards]
        host = Occupant(None, "", (), cpu_cores=min(task.cpu_cores, max(node.host_cpu_free, 0.0)),
                        memory_mb=min(task.memory_mb, max(node.host_memory_free_mb, 0))) if reserved else None
        if held or host is not None and (host.cpu_cores or host.memory_mb):
            hold = self.holds[task.id] = _Hold(node, held, reserved, host)
            for occupant in hold.everything:
                assume(node, occupant)
            if reserved:
                node.reserved_cards += len(held)
            node_changed(snapshot, node)

    def release_for(self, task: TaskInfo, snapshot: ClusterSnapshot) -> None:
        """The nominee is about to be placed: its held cards are free for it."""
        held = self.holds.pop(task.id, None)
        if held is not None:
            for occupant in held.everything:
                forget(held.node, occupant)
            if held.reserved:
                held.node.reserved_cards -= len(held.occupants)
                self.released_reservations[task.id] = held.node.id
            node_changed(snapshot, held.node)

    def renominate(self, task: TaskInfo, node_id: int) -> None:
        """The reserved job's node changed during its attempt (defrag emptied another): held there from now on."""
        if task.id in self.released_reservations:
            self.released_reservations[task.id] = node_id

    def restore_for(self, task: TaskInfo, snapshot: ClusterSnapshot) -> None:
        """The reserved job's attempt placed it nowhere: its node's free cards are held for it again."""
        node_id = self.released_reservations.pop(task.id, None)
        if node_id is not None:
            self.hold(task, node_id, snapshot, reserved=True)


def _held_for_nobody(node: NodeInfo, card: CardInfo) -> Occupant:
    """A card held as a whole-card occupant of no tenant yet, counted in the node's ledger."""
    return Occupant(None, "", (card.index,), card_type_of(card, node), ledger_gpus=1)


def hold_nominated_cards(snapshot: ClusterSnapshot) -> HeldCards:
    """Hold the nominated nodes' cards for their nominees, in the snapshot: pending tasks, and tasks defrag is
    moving (`preempting` with their target as nomination, design §16.3)."""
    held = HeldCards()
    rows = (Task.objects.filter(status__in=(lifecycle.PENDING, lifecycle.PREEMPTING), nominated_node__isnull=False)
            .order_by("-priority", "created_at", "id")
            .values_list("nominated_node_id", "reserved_at", *TASK_INFO_FIELDS))
    for node_id, reserved_at, *fields in rows:
        held.hold(task_info_from_row(tuple(fields)), node_id, snapshot, reserved=reserved_at is not None)
    return held


def nominate(*, task_id: int, node_id: int) -> bool:
    """The pending task's preemption is freeing cards on the node for it."""
    return bool(Task.objects.filter(id=task_id, status=lifecycle.PENDING).update(nominated_node_id=node_id))


def settle(outcomes: dict[int, str]) -> int:
    """Nominations end with the nominee's next attempt, unless it is still waiting for its victims; a reserved
    job's only when it binds."""
    done = [task_id for task_id, code in outcomes.items() if code not in reasons.VICTIMS_STOPPING]
    if not done:
        return 0
    bound = [task_id for task_id in done if outcomes[task_id] == reasons.SCHEDULED]
    return (Task.objects.filter(id__in=done, nominated_node__isnull=False)
            .filter(Q(reserved_at__isnull=True) | Q(id__in=bound)).update(nominated_node=None))
