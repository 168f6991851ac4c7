"""kube-scheduler's equivalence cache, over the NumPy table: the per-row result of a filter or a scorer is computed
once per equivalence class of tasks and shared by every task of that class, in this cycle and the next ones.

A row plugin names the class of a task with `filter_key(task, table)` / `score_key(task, table)`: the task fields its result for a
row depends on (None: it depends on more than the task and that row, and is never shared). Most tasks of a cycle
share a class with an earlier one for each plugin (tenant, GPU type, card count), even when no two tasks have the
same shape. A result is kept for every table row, so tasks with different survivors of the earlier filters share it.

Invalidation: every change to a row goes through `NodeTable.refresh_row` (the in-memory bind, a node re-read, cards
held for a nominee), which appends the row to the table's `changed_rows`. An entry remembers how much of that log it
has seen; before it is used, the rows logged since are computed again (usually the one node the previous task was
placed on). A new table (the node list changed, or the scheduler cache's periodic full read) starts a new cache.

Lifetime: the cache lives with the table, which the scheduler cache keeps between cycles, so the first task of a
class in a cycle pays for the rows changed since the class was last evaluated (the nodes re-read at the cycle's
start are logged like any other refresh), not for the whole cluster. Each cycle builds its framework afresh; one
whose plugin context — the plugins' settings and the share groups, the only inputs a keyed rule may read besides
the task's key, its row and the config (`RowPlugin.filter_key`), the config being the table's — equals an earlier
one's shares that one's cache.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from scheduling.framework.snapshot import ClusterSnapshot
    from scheduling.framework.table import NodeTable

RowCompute = Callable[[np.ndarray], np.ndarray]
# A `filter_key` for a task every row passes (an nvlink or rdma rule the task does not ask for): nothing to evaluate.
EVERY_ROW_PASSES = ("every row passes",)
# Plugin contexts whose caches a table keeps; a further one replaces the oldest (previews of other settings).
CONTEXTS_KEPT = 4


class _Entry:
    __slots__ = ("values", "seen", "failing", "any_failing")

    def __init__(self, values: np.ndarray, seen: int) -> None:
        self.values = values
        self.seen = seen
        self.failing: np.ndarray | None = None    # filter codes only: values != 0
        self.any_failing = True


class EquivalenceCache:
    """Per-row results of one framework's plugins over one table, by (plugin slot, equivalence key)."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self._entries: dict[Hashable, _Entry] = {}
        self._all_rows = np.arange(table.size)
        # The rows logged since a position, while the log keeps its length: every plugin slot of a task asks for
        # the same few (those the previous task changed).
        self._since: dict[tuple[bool, int], np.ndarray] = {}
        self._since_length = (0, 0)

    def rows(self, slot: Hashable, key: Hashable, compute: RowCompute, *, follows_usage: bool = True) -> np.ndarray:
        """The result for every table row of the plugin at `slot` for tasks of class `key`, current with the table:
        `compute(rows)` gives it for the given rows; unless the plugin `follows_usage`, rows whose usage alone
        changed keep theirs. The array is the cache's own: read it, never keep or change it."""
        return self._current(slot, key, compute, follows_usage)[0].values

    def codes(self, slot: Hashable, key: Hashable, compute: RowCompute, *,
              follows_usage: bool = True) -> tuple[np.ndarray, np.ndarray] | None:
        """`rows` for a filter's codes (0 passes), with the mask of the rows it rejects; None when it rejects none."""
        entry, stale = self._current(slot, key, compute, follows_usage)
        if stale is None:
            entry.failing = entry.values != 0
            entry.any_failing = bool(entry.failing.any())
        elif len(stale):
            failing = entry.values[stale] != 0
            entry.failing[stale] = failing
            entry.any_failing = entry.any_failing or bool(failing.any())
        return (entry.values, entry.failing) if entry.any_failing else None

    def _current(self, slot: Hashable, key: Hashable, compute: RowCompute,
                 follows_usage: bool) -> tuple[_Entry, np.ndarray | None]:
        """The entry, and the rows computed again for it now (None: all of them, a new entry)."""
        log = self.table.changed_rows if follows_usage else self.table.reshaped_rows
        entry = self._entries.get((slot, key))
        # An entry behind by more log than the table has rows is computed afresh: no cheaper than every row.
        if entry is None or len(log) - entry.seen > self.table.size:
            entry = self._entries[(slot, key)] = _Entry(np.asarray(compute(self._all_rows)), len(log))
            return entry, None
        if entry.seen == len(log):
            return entry, _NO_ROWS
        stale = self._logged_since(log, entry.seen)
        entry.values[stale] = compute(stale)
        entry.seen = len(log)
        return entry, stale

    def _logged_since(self, log: list[int], seen: int) -> np.ndarray:
        """The distinct rows of `log` from position `seen` on, in row order."""
        lengths = (len(self.table.changed_rows), len(self.table.reshaped_rows))
        if lengths != self._since_length:
            self._since.clear()
            self._since_length = lengths
        key = (log is self.table.changed_rows, seen)
        rows = self._since.get(key)
        if rows is None:
            rows = self._since[key] = np.fromiter(sorted(set(log[seen:])), np.int64)
        return rows


_NO_ROWS = np.zeros(0, np.int64)


def equivalence_cache(snapshot: ClusterSnapshot, table: NodeTable, owner: object, context: Any) -> EquivalenceCache:
    """`owner`'s (a framework's) cache over the snapshot's current table: the table's cache for `context` (compared
    by equality), made when the table has none. The snapshot remembers which one is the owner's, so each attempt
    finds it without comparing contexts."""
    # The owner is kept with its cache, so its id cannot be reused by another framework meanwhile.
    kept = snapshot.equivalence.get(id(owner))
    if kept is None or kept[0] is not owner or kept[1].table is not table:
        cache = next((cache for each, cache in table.equivalence if each == context), None)
        if cache is None:
            cache = EquivalenceCache(table)
            table.equivalence[:] = [*table.equivalence[1 - CONTEXTS_KEPT:], (context, cache)]
        kept = snapshot.equivalence[id(owner)] = (owner, cache)
    return kept[1]
