"""What a shard leaves behind on its card, looked at beyond the next task (fgd's `gap_weight`, design §15.9).

The paper's F looks one task ahead. A 230 MB shard that may go on a card with 350 MB free or on one with 450 MB
free: on the first it leaves 120 MB, on the second 220 MB, and one task ahead the smaller rest is the smaller
fragment, so F takes the first — though no shape fits 120 MB, while a 220 MB shard fills the second card's rest
and a 320 MB one the first card's 350. What a card's gap finally wastes depends on the tasks that may still fill
it, one after the other.

V(g) is that expectation for a card whose free share is g (in `STEPS` steps of the card). Each later arriving task
is drawn from the target workload: a shape that fits the gap (a shard no larger than g, or a whole card when the card
is idle) lands on it and leaves g − its size; the gap's wait ends unfilled with probability 1 / `horizon` per arrival
(the cluster fills up, other cards take the tasks that would have fitted). So, with P(g) the popularity of the
shapes that fit and θ = 1 / horizon:

    V(0) = 0,   V(g) = (θ · g + Σ_{s fits g} p_s · V(g − s)) / (P(g) + θ)

V is in cards. A shard on a card moves its gap from g to g − s: fgd adds `gap_weight` × (V(g − s) − V(g)) to the
node's ΔF for that card, so a gap that later tasks will fill well is kept open and a shard goes where it leaves the
least lasting waste. Cards of different sizes have their own V (a shape's shard is a different share of each).
"""

from __future__ import annotations

import numpy as np

from scheduling.framework.arrays import clipped
from scheduling.framework.table import NodeTable
from scheduling.plugins.fgd.workload import TargetWorkload

STEPS = 100          # a card's free share in hundredths: fine enough for shard sizes, 101 values per card size


def gap_values(workload: TargetWorkload, capacity_mb: float, horizon: float) -> np.ndarray:
    """V(g) for g = 0 … STEPS, in cards, for cards offering `capacity_mb` to shards."""
    sizes, weights = [], []
    for shape, popularity in zip(workload.shapes, workload.popularity):
        if shape.cards:
            sizes.append(STEPS)          # whole cards: only an idle card
        elif shape.shard_mb:
            sizes.append(max(1, int(round(shape.shard_mb / max(capacity_mb, 1.0) * STEPS))))
        else:
            continue                     # a task without GPU fills no gap
        weights.append(popularity)
    sizes_array, weights_array = np.array(sizes, np.int64), np.array(weights, float)
    end = 1.0 / horizon
    value = np.zeros(STEPS + 1)
    for gap in range(1, STEPS + 1):
        fits = sizes_array <= gap
        value[gap] = (end * gap + weights_array[fits] @ value[gap - sizes_array[fits]]) / (
            weights_array[fits].sum() + end)
    return value / STEPS


class GapTable:
    """V for each card size of one table, as a (sizes × STEPS + 1) matrix, and each card's row in it."""

    def __init__(self, workload: TargetWorkload, horizon: float) -> None:
        self.workload, self.horizon = workload, horizon
        self.sizes = np.zeros(0)
        self.values = np.zeros((0, STEPS + 1))

    def growth(self, table: NodeTable, rows: np.ndarray, shard_mb: float) -> np.ndarray:
        """rows × cards: V(gap after the shard) − V(gap before) for each card of `rows`. Cards the shard cannot
        take (or that do not exist) get a value too; the caller masks them."""
        capacity = np.maximum(table.card_capacity_mb[rows], 1.0)
        if not capacity.size:
            return np.zeros(capacity.shape)
        index = self._index(capacity)
        free = np.maximum(table.card_free_mb[rows], 0.0)
        before = _step(free / capacity)
        after = _step(np.maximum(free - shard_mb, 0.0) / capacity)
        return self.values[index, after] - self.values[index, before]

    def _index(self, capacity: np.ndarray) -> np.ndarray:
        """Each card's row in `values`, adding the sizes not met before (a table's sizes rarely change)."""
        index = np.minimum(np.searchsorted(self.sizes, capacity), max(len(self.sizes) - 1, 0))
        if len(self.sizes) and (self.sizes[index] == capacity).all():
            return index
        self.sizes = np.union1d(self.sizes, np.unique(capacity))
        self.values = np.stack([gap_values(self.workload, float(size), self.horizon) for size in self.sizes])
        return np.searchsorted(self.sizes, capacity)


def _step(share: np.ndarray) -> np.ndarray:
    """A card's free share as the nearest of `STEPS` steps, within 0 … STEPS."""
    return clipped(np.rint(share * STEPS).astype(np.int64), 0, STEPS)
