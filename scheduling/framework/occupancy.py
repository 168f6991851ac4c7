"""What a node holds, and the one place that changes it in memory (kube-scheduler's `NodeInfo.AddPod/RemovePod`).

An `Occupant` is one placement as the node sees it: the tenant, the task type, the cards it holds (`cards_held`),
whether it holds them whole or as a shard, and the host CPU cores and memory it books (design §16.1). `assume` adds it to a node, `forget` takes it away; every in-memory
change of occupancy goes through them — the snapshot build, the cycle's binds (`apply_bind`), the trace replay's
departures (`apply_release`), nomination's held cards, the preemption planner's "as if the victims stopped" and the
bind's live read. A resource a node starts to book (host CPU and memory, usage per GPU type) is added here once.

`apply_bind` / `apply_release` are the snapshot-level forms: the node, the tenant's quota usage and the node's row
in the snapshot's table. Mutate snapshot nodes only through them (or set `snapshot.table = None` after changing
nodes some other way).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from scheduling.fair_share.book import card_share
from scheduling.framework.cards import card_lookup, cards_by_key
from scheduling.framework.sharing import compute_percent_for
from scheduling.framework.snapshot import CardInfo, ClusterSnapshot, NodeInfo, TaskInfo
from scheduling.framework.table import CHANGED_IN_MEMORY, PLACED

INFERENCE = "inference"
CardsByKey = dict[tuple[str, int], CardInfo]


def cards_held(gpus: Iterable[int] | None, shard: Mapping[str, Any] | None) -> list[int]:
    """THE rule for which cards a placement holds, from what a task row records: a shard holds its one card
    (whatever `gpus` repeats of it); otherwise the whole cards in `gpus`."""
    if shard and shard.get("card") is not None:
        return [int(shard["card"])]
    return [int(index) for index in gpus or ()]


@dataclass(slots=True)
class Occupant:
    """One placement on a node. `shard_memory_mb` is None for whole cards; `ledger_gpus` is what it adds to the
    node's `gpu_used` ledger when the ledger is kept in memory; `tenant_id` None holds cards for nobody yet
    (nomination). A shard's `compute_percent` is the task's own figure or, None, its card's share
    (`compute_percent_for`)."""

    tenant_id: int | None
    task_type: str
    cards: tuple[int, ...]
    card_type: str = ""
    shard_memory_mb: int | None = None
    ledger_gpus: int = 0
    cpu_cores: float = 0.0
    memory_mb: int = 0
    # Not compared: a placement's stored percent is `compute_percent_for` of the task's figure and the card, which
    # the card fields and the task's memory already tell apart.
    compute_percent: int | None = field(default=None, compare=False)

    @property
    def is_shard(self) -> bool:
        return self.shard_memory_mb is not None

    @classmethod
    def of_task(cls, task: TaskInfo, cards: Sequence[int]) -> Occupant:
        """A task the cycle placed, `cards` as Reserve chose them (a `ChosenCards` carries their type)."""
        shard = task.gpu_required <= 0 and task.is_fractional
        return cls(task.tenant_id, task.type, tuple(cards), getattr(cards, "card_type", "") or task.gpu_type,
                   task.gpu_memory_mb if shard else None, task.gpu_required, task.cpu_cores, task.memory_mb,
                   task.gpu_compute_percent if shard else None)

    @classmethod
    def of_row(cls, *, tenant_id: int, task_type: str, gpus: list[int] | None, shard: Mapping[str, Any] | None,
               gpu_memory_mb: int, card_type: str = "", gpu_required: int = 0, cpu_cores: float = 0.0,
               memory_mb: int = 0) -> Occupant:
        """An active task as the database records it (its node's ledger already counts it)."""
        shard_memory = int(shard.get("memory_limit_mb") or gpu_memory_mb) if shard else None
        return cls(tenant_id, task_type, tuple(cards_held(gpus, shard)), card_type, shard_memory, gpu_required,
                   cpu_cores, memory_mb, shard.get("compute_percent") if shard else None)


def occupied_cards(node: NodeInfo, occupant: Occupant, cards: CardsByKey | None = None) -> list[CardInfo]:
    """The node's cards `occupant` holds (`cards`: the node's cards by key, when the caller already has them)."""
    by_key = cards if cards is not None else cards_by_key(node)
    return [card for card in (card_lookup(by_key, card_type=occupant.card_type, index=index,
                                          node_gpu_type=node.gpu_type) for index in occupant.cards)
            if card is not None]


def assume(node: NodeInfo, occupant: Occupant, *, cards: CardsByKey | None = None, ledger: bool = True) -> None:
    """Count `occupant` on `node`. `ledger=False` when the node's `gpu_used` was read with the occupant already
    in it (the database's ledger)."""
    for card in occupied_cards(node, occupant, cards):
        if occupant.is_shard:
            card.shard_tasks += 1
            card.shard_memory_mb += occupant.shard_memory_mb
            card.shard_compute_percent += _shard_compute(occupant, card)
        else:
            card.whole_card_tasks += 1
        if occupant.tenant_id is not None:
            card.occupant_tenants.add(occupant.tenant_id)
    if ledger:
        node.gpu_used += occupant.ledger_gpus
    node.cpu_booked += occupant.cpu_cores
    node.memory_booked_mb += occupant.memory_mb
    if occupant.task_type == INFERENCE:
        node.inference_tasks += 1
    node.cache.clear()


def forget(node: NodeInfo, occupant: Occupant, *, staying: Iterable[Occupant] = (),
           cards: CardsByKey | None = None) -> list[CardInfo]:
    """Undo `assume`; `staying`: the occupants left on the node, so a tenant keeps its place on a card another of
    its placements still holds. Returns the cards it held."""
    by_key = cards if cards is not None else cards_by_key(node)
    held = occupied_cards(node, occupant, by_key)
    for card in held:
        if occupant.is_shard:
            card.shard_tasks = max(card.shard_tasks - 1, 0)
            card.shard_memory_mb = max(card.shard_memory_mb - occupant.shard_memory_mb, 0)
            card.shard_compute_percent = max(card.shard_compute_percent - _shard_compute(occupant, card), 0)
        else:
            card.whole_card_tasks = max(card.whole_card_tasks - 1, 0)
    if occupant.tenant_id is not None:
        still_held = {id(card) for other in staying if other.tenant_id == occupant.tenant_id
                      for card in occupied_cards(node, other, by_key)}
        for card in held:
            if id(card) not in still_held:
                card.occupant_tenants.discard(occupant.tenant_id)
    node.gpu_used = max(node.gpu_used - occupant.ledger_gpus, 0)
    node.cpu_booked = max(node.cpu_booked - occupant.cpu_cores, 0.0)
    node.memory_booked_mb = max(node.memory_booked_mb - occupant.memory_mb, 0)
    if occupant.task_type == INFERENCE:
        node.inference_tasks = max(node.inference_tasks - 1, 0)
    node.cache.clear()
    return held


def _shard_compute(occupant: Occupant, card: CardInfo) -> int:
    return compute_percent_for(gpu_memory_mb=occupant.shard_memory_mb, gpu_compute_percent=occupant.compute_percent,
                               card_memory_mb=card.memory_total_mb)


def apply_bind(snapshot: ClusterSnapshot, task: TaskInfo, node: NodeInfo, cards: list[int]) -> None:
    """Record a bind in the snapshot (`cards` as Reserve chose them, of one type): the node's occupancy, the
    tenant's quota usage and the node's table row."""
    occupant = Occupant.of_task(task, cards)
    assume(node, occupant)
    gpu_type = occupant.card_type or node.gpu_type
    card = next(iter(occupied_cards(node, occupant)), None) if task.is_fractional else None
    share = card_share(task, card.memory_total_mb if card else 0)
    book = snapshot.quotas
    book.record_bind(task, gpu_type=gpu_type, share=share,
                     borrowed=book.admit(task, gpu_type=gpu_type, share=share).borrowed)
    spread = snapshot.group_spread.get(task.group_id) if task.group_id is not None else None
    if spread is not None:
        spread.placed(node)
    node_changed(snapshot, node, cause=PLACED)


def apply_release(snapshot: ClusterSnapshot, task: TaskInfo, node: NodeInfo, cards: list[int], *,
                  staying: Sequence[tuple[TaskInfo, list[int]]]) -> None:
    """Undo `apply_bind` for a task that finished: the trace replay's departures (a cycle never releases in its
    snapshot; it reads the cluster again). `staying`: the placements (task, cards) still on the node."""
    forget(node, Occupant.of_task(task, cards),
           staying=[Occupant.of_task(other, other_cards) for other, other_cards in staying])
    snapshot.quotas.forget_bind(task)
    node_changed(snapshot, node)


def node_changed(snapshot: ClusterSnapshot, node: NodeInfo, *, cause: str = CHANGED_IN_MEMORY) -> None:
    """The node's derived data and its row of the snapshot's table follow a change of its occupancy (`cause`: what
    changed it, `NodeTable.refresh_rows`)."""
    node.cache.clear()
    table = snapshot.table
    if table is not None and table.row_of.get(node.id) is not None and table.nodes[table.row_of[node.id]] is node:
        table.refresh_row(table.row_of[node.id], cause=cause)


def emptied(node: NodeInfo) -> NodeInfo:
    """A copy of the node as it would be with none of its tasks: no occupants, no ledger, no load reported by them,
    no booked host resources and no cards held for a reservation (what a reserved job or defrag asks of a node)."""
    cards = [CardInfo(index=card.index, uuid=card.uuid, type=card.type, model=card.model,
                      memory_total_mb=card.memory_total_mb, numa=card.numa) for card in node.cards]
    return replace(node, gpu_used=0, cpu_percent=0.0, memory_used_mb=0, inference_tasks=0, cards=cards,
                   cpu_booked=0.0, memory_booked_mb=0, reserved_cards=0, cache={})
