"""Node GPU fragmentation against a target workload (Weng et al., "Beware of Fragmentation", USENIX ATC'23 §4).

For a node n and one task shape m, the fragment F_n(m) is the idle GPU capacity of n that m cannot use:
all of it when m cannot be placed on n at all (too few usable cards, too little CPU, wrong type or model, or m asks
for no GPU), otherwise the idle capacity of the cards m cannot use (a card holds less than m asks of one card).
The node's fragmentation is the expectation over the workload, F_n = Σ_m p_m F_n(m). Capacity is counted in cards:
an idle card is 1, a card holding shards counts its free memory over its capacity, a card held whole counts 0.

With `cpu_weight` w > 0 (HeteroFlow's extension, the `fgd` setting of that name) F_n also counts, w times, the idle
cards the node's free CPU cannot feed at the workload's mean CPU per card: w · max(0, idle − free CPU / (CPU per
card)). The paper's F_n sees a node's CPU only once a shape no longer fits; this sees it running out while it
still fits, so CPU-hungry tasks go where CPU is plentiful before the GPUs it would strand are the last ones left.

Everything is evaluated for many node states at once: a `CardState` holds, per state, the cards' figures
(states × cards) and the free CPU cores; the masks say which cards each shape may use (type and model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from scheduling.framework.arrays import clipped
from scheduling.framework.table import NodeTable
from scheduling.framework.gpu_models import model_matches
from scheduling.plugins.fgd.workload import TargetWorkload

CPU_TOLERANCE = 1e-6


@dataclass
class CardState:
    idle: np.ndarray          # states × cards: idle share of each card (1 idle card, 0 held whole or unusable)
    free_mb: np.ndarray       # memory a shard may still take
    whole_ok: np.ndarray      # a whole-card task may take the card (no occupant, under the memory threshold)
    share_ok: np.ndarray      # a shard may go there (no whole-card occupant, under the threshold)
    cpu_free: np.ndarray      # per state: free cores

    def take(self, index: np.ndarray) -> CardState:
        return CardState(self.idle[index], self.free_mb[index], self.whole_ok[index], self.share_ok[index],
                         self.cpu_free[index])


def table_state(table: NodeTable, rows: np.ndarray, cores: np.ndarray) -> CardState:
    """The current state of `rows`, read from the framework's table (`cores`: per table row)."""
    whole_ok = table.card_usable[rows]
    share_ok = table.card_shardable[rows]
    free_mb = np.where(share_ok, np.maximum(table.card_free_mb[rows], 0.0), 0.0)
    # free_mb is 0 where no shard may go, so is the share there
    idle = np.where(whole_ok, 1.0, np.minimum(card_share(free_mb, table.card_capacity_mb[rows]), 1.0))
    cpu_free = cores[rows] * (1 - table.cpu_usage[rows])
    return CardState(idle, free_mb, whole_ok, share_ok, cpu_free)


def card_share(free_mb: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """free_mb ÷ capacity (of free_mb's shape; capacity may broadcast to it), 0 where a card has no capacity."""
    return np.divide(free_mb, capacity, out=np.zeros(free_mb.shape), where=capacity > 0)


class ShapeArrays:
    """The workload's shapes as arrays, with the card masks of one table (which cards each shape may use)."""

    def __init__(self, workload: TargetWorkload, table: NodeTable, *, cpu_weight: float = 0.0) -> None:
        shapes = workload.shapes
        self.weights = workload.weights()
        self.cards = np.array([shape.cards for shape in shapes], np.int64)
        self.shard_mb = np.array([shape.shard_mb for shape in shapes], float)
        self.cpu = np.array([shape.cpu for shape in shapes], float)
        self.uses_gpu = np.array([shape.uses_gpu for shape in shapes], bool)
        # The cards a shape needs in one node: a shape without GPU (or needing more cards than any node has) needs
        # one more than a node has, so never fits by its cards.
        never = table.width + 1
        # `fragmentation` counts a state's usable cards in bytes while a node has fewer than 255 cards.
        self.count_dtype = np.uint8 if never <= np.iinfo(np.uint8).max else np.intp
        cards_needed = np.where(self.uses_gpu, clipped(self.cards, 1, never), never)
        self.whole = self.cards > 0
        keys = sorted({(shape.gpu_type, shape.models) for shape in shapes})
        self.key_index = np.array([keys.index((shape.gpu_type, shape.models)) for shape in shapes], np.int64)
        self.masks = np.stack([card_mask(table, gpu_type, models) for gpu_type, models in keys]) if keys \
            else np.zeros((0, table.size, table.width), bool)
        self.any_card = all(not gpu_type and not models for gpu_type, models in keys)
        # Shapes that differ only in CPU, or only in how many whole cards they take, may use the same cards: the
        # states × cards work is done once per GPU profile (whole cards, or a shard of its size; its card mask) and
        # each shape reads its profile's figures.
        of_shape = [(bool(whole), 0.0 if whole else float(size), int(key))
                    for whole, size, key in zip(self.whole.tolist(), self.shard_mb.tolist(), self.key_index.tolist())]
        profiles = sorted(set(of_shape))
        self.profile_of = np.array([profiles.index(profile) for profile in of_shape], np.int64)
        self.profile_whole = np.array([whole for whole, _, _ in profiles], bool)
        self.whole_profiles = np.flatnonzero(self.profile_whole)
        self.shard_profiles = np.flatnonzero(~self.profile_whole)
        # The shard profiles' sizes, each once: profiles of one size differ only in their card masks.
        self.shard_sizes, self.shard_size_of = np.unique([profiles[index][1] for index in self.shard_profiles],
                                                         return_inverse=True)
        self.fitting_weight, self.cpu_floors = _fitting_weights(self.profile_of, len(profiles), cards_needed,
                                                                self.cpu - CPU_TOLERANCE, self.weights, never)
        # Where each profile's block of `fitting_weight` starts, and a CPU level's step in it.
        self.cpu_level_step = never + 1
        self.fitting_block = np.arange(len(profiles)) * ((len(self.cpu_floors) + 1) * self.cpu_level_step)
        profile_key_index = np.array([key for _, _, key in profiles], np.int64)
        # profiles × rows × cards
        self.profile_masks = self.masks[profile_key_index] if keys else np.zeros((0, table.size, table.width), bool)
        self.cpu_weight = cpu_weight
        # The GPU shapes' mean CPU per card of GPU asked (a shard asks its share of a typical card).
        capacities = table.card_capacity_mb[table.card_exists]
        typical_mb = float(np.median(capacities)) if len(capacities) else 1.0
        cards = np.where(self.whole, self.cards, self.shard_mb / max(typical_mb, 1.0))[self.uses_gpu]
        self.cpu_per_card = max(float(self.weights[self.uses_gpu] @ self.cpu[self.uses_gpu]), CPU_TOLERANCE) / max(
            float(self.weights[self.uses_gpu] @ cards), CPU_TOLERANCE)

    def __len__(self) -> int:
        return len(self.weights)


def _fitting_weights(profile_of: np.ndarray, profiles: int, cards_needed: np.ndarray, cpu_floor: np.ndarray,
                     weights: np.ndarray, never: int) -> tuple[np.ndarray, np.ndarray]:
    """What `fragmentation` reads a state's fitting shapes from, one profile at a time: weights[profile, CPU level,
    usable cards] is the popularity of the profile's shapes that need no more CPU than the level's and no more cards
    than that (level j: free CPU at least the j-th lowest of the shapes' CPU floors, 0 below them all); and those
    floors, sorted. Flattened, with each profile's block `levels × (never + 1)` long."""
    floors = np.unique(cpu_floor)
    table = np.zeros((profiles, len(floors) + 1, never + 1))
    np.add.at(table, (profile_of, np.searchsorted(floors, cpu_floor) + 1, cards_needed), weights)
    return np.cumsum(np.cumsum(table, axis=2), axis=1).ravel(), floors


def card_mask(table: NodeTable, gpu_type: str, models: str) -> np.ndarray:
    """table rows × card columns: the card exists and is of `gpu_type` and a `models` model (blank = any)."""
    mask = table.card_exists.copy()
    if not gpu_type and not models:
        return mask
    for row, node in enumerate(table.nodes):
        for column, card in enumerate(node.cards[: table.width]):
            if gpu_type and card.type != gpu_type and node.gpu_type != gpu_type:
                mask[row, column] = False
            elif models and not model_matches(models, card.model):
                mask[row, column] = False
    return mask


class Measured(NamedTuple):
    """States as `fragmentation_of` reads them: the cards each GPU profile may use (profiles × states × cards), the
    cards' idle shares and the free CPU cores."""
    usable: np.ndarray
    idle: np.ndarray
    cpu_free: np.ndarray

    def take(self, index: np.ndarray) -> Measured:
        return Measured(self.usable[:, index], self.idle[index], self.cpu_free[index])

    def joined(self, other: Measured) -> Measured:
        """These states, then `other`'s."""
        return Measured(np.concatenate((self.usable, other.usable), axis=1), np.concatenate((self.idle, other.idle)),
                        np.concatenate((self.cpu_free, other.cpu_free)))

    def after_whole(self, taken: np.ndarray | None, cpu: float) -> Measured:
        """The states once a task took the `taken` cards (each held whole; None: no card) and `cpu` cores: no
        profile may use a card taken, idle no more; the other cards are as they were."""
        if taken is None:
            return Measured(self.usable, self.idle, self.cpu_free - cpu)
        return Measured(self.usable & ~taken[None], np.where(taken, 0.0, self.idle), self.cpu_free - cpu)


def fragmentation(state: CardState, rows: np.ndarray, shapes: ShapeArrays) -> np.ndarray:
    """F_n for each state (`rows[i]` is the table row state i belongs to, for the card masks)."""
    if not len(shapes):
        return np.zeros(len(state.idle))
    return fragmentation_of(measured(state, rows, shapes), shapes)


def measured(state: CardState, rows: np.ndarray, shapes: ShapeArrays) -> Measured:
    """The states with the cards each of the workload's GPU profiles may use (`rows[i]` is the table row state i
    belongs to, for the card masks)."""
    # profiles × states × cards, profile by profile: each profile's cards are one contiguous block to fill
    usable = np.empty((len(shapes.profile_whole), *state.idle.shape), bool)
    usable[shapes.whole_profiles] = state.whole_ok
    usable[shapes.shard_profiles] = (state.share_ok[None] & (
        state.free_mb[None] >= shapes.shard_sizes[:, None, None]))[shapes.shard_size_of]
    if not shapes.any_card:
        usable &= np.take(shapes.profile_masks, rows, axis=1)    # take: indexing a middle axis is ten times slower
    return Measured(usable, state.idle, state.cpu_free)


def fragmentation_of(states: Measured, shapes: ShapeArrays) -> np.ndarray:
    """`fragmentation` of `measured` states (of a workload with shapes)."""
    usable, idle, cpu_free = states
    total = idle.sum(axis=1)
    # Σ over shapes of popularity × fits × the idle capacity it can use, profile by profile: the shapes of a
    # profile use the same cards, and which of them fit a state is read off `fitting_weight` by its usable cards
    # and free CPU. Counted as bytes: a sum over a bool axis of a few cards is several times slower. The sum
    # over profiles runs along each state's own row (states × profiles), whatever states share the call: an
    # einsum (or a matrix product) rounds a state's sum differently with other states beside it.
    counts = np.einsum("pbw->bp", usable.view(np.uint8), dtype=shapes.count_dtype).astype(np.intp, copy=False)
    level = np.searchsorted(shapes.cpu_floors, cpu_free, side="right") * shapes.cpu_level_step
    fitting = np.take(shapes.fitting_weight, counts + level[:, None] + shapes.fitting_block)
    value = total - (np.einsum("pbw,bw->bp", usable, idle) * fitting).sum(axis=1)
    if shapes.cpu_weight:
        value += shapes.cpu_weight * np.maximum(total - cpu_free / shapes.cpu_per_card, 0)
    return value


def cards_for_whole(state: CardState, task_mask: np.ndarray, needed: int, memory_mb: float) -> np.ndarray:
    """Per state, the cards the production card choice gives a whole-card task: the lowest-indexed free cards
    (all idle cards look alike to it; see `default_cards`)."""
    usable = state.whole_ok & task_mask
    if memory_mb:
        usable &= state.free_mb >= memory_mb
    return usable & (np.cumsum(usable, axis=1) <= needed)


def after_shards(state: CardState, capacity: np.ndarray, memory_mb: float, cpu: float) -> CardState:
    """states × cards new states, flattened (state i, card w → i × cards + w): the shard on card w."""
    count, width = state.idle.shape
    eye = np.eye(width, dtype=bool)[None, :, :]                                     # 1 × placed card × cards
    free_mb = np.where(eye, state.free_mb[:, None, :] - memory_mb, state.free_mb[:, None, :])
    share = clipped(card_share(free_mb, capacity[:, None, :]), 0.0, 1.0)
    idle = np.where(eye, share, state.idle[:, None, :])
    whole_ok = state.whole_ok[:, None, :] & ~eye
    share_ok = np.broadcast_to(state.share_ok[:, None, :], (count, width, width))
    cpu_free = np.repeat(state.cpu_free - cpu, width)
    return CardState(idle.reshape(-1, width), free_mb.reshape(-1, width), whole_ok.reshape(-1, width),
                     share_ok.reshape(-1, width), cpu_free)


def cluster_fragmentation(table: NodeTable, workload: TargetWorkload) -> tuple[float, float]:
    """(Σ F_n over the table's nodes, their idle cards), both in cards."""
    rows = np.arange(table.size)
    cores = np.array([float(node.cpu_cores) for node in table.nodes])
    state = table_state(table, rows, cores)
    return float(fragmentation(state, rows, ShapeArrays(workload, table)).sum()), float(state.idle.sum())
