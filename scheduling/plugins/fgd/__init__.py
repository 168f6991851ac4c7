"""fgd: Fragmentation Gradient Descent layout (Weng et al., USENIX ATC'23; design §15.9). Exclusive with spread/binpack.

A node's fragmentation is measured against the target workload (`fragmentation`): the idle GPU capacity that the
popular task shapes could not use there. The score prefers the node whose fragmentation grows least when the task
lands on it: 100 × sigmoid(−ΔF), ΔF in cards (the paper's sigmoid of the milli-GPU difference / 1000). For a shard,
ΔF is that of the best card, and the Reserve point (`reserve`) puts the shard on that card.

Settings (`extra`, design §15.9): `cpu_weight` adds the CPU-starved idle cards to the fragment (`fragmentation`);
`gap_weight` adds, for a shard, what its card's gap will finally waste beyond the next task (`gaps`: V(g − s) − V(g),
with `gap_horizon` the arrivals a gap may wait for a task to fill it); `tie_break: best-fit` rounds the score to
whole points and, at PostScore, breaks ties of the nodes' totals by best fit (the node left with the least GPU and
CPU): up to 0.999 is added to each total, never enough to overturn a whole point. `DEFAULTS` are what the
openb replay measured best, so an admin who enables fgd gets them; a setting left out takes its default. `PAPER`
(none of them) is the paper's FGD, kept for comparison.

The target workload is the popularity of shapes among recently submitted tasks (`recent.recent_workload`); a trace
replay gives the trace's (`use_workload`). ΔF is cached per table row (per row and card for a shard) and task shape
and recomputed only for rows an in-memory bind changed, so a cycle's later tasks pay for the nodes that moved, not
for the cluster.

The rest of HeteroFlow uses fgd only through this module: `SPEC` (whose `on_tasks_created` feeds the recent-task
window), `fragmentation_summary` and `target_workload_summary` for the diagnostics, and for the trace replay and
the benchmark `TargetWorkload`, `cluster_fragmentation`, `RECENT_WINDOW`, `record_shapes` and `clear_recent_window`;
its submodules are its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from scheduling.framework.arrays import clipped
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import POST_SCORE, RESERVE, SCORE, PluginSetting, PluginSpec
from scheduling.framework.sharing import card_admits_tenant
from scheduling.framework.snapshot import NodeInfo, SchedulerConfig, TaskInfo
from scheduling.framework.table import NodeTable, single_row_table
from scheduling.framework.gpu_models import MODEL_LABEL
from scheduling.plugins.fgd import fragmentation as frag
from scheduling.plugins.fgd import recent
from scheduling.plugins.fgd.fragmentation import cluster_fragmentation
from scheduling.plugins.fgd.gaps import GapTable
from scheduling.plugins.fgd.recent import WINDOW as RECENT_WINDOW
from scheduling.plugins.fgd.recent import clear_window as clear_recent_window
from scheduling.plugins.fgd.recent import record_shapes
from scheduling.plugins.fgd.workload import TargetWorkload

NAME = "fgd"
NEUTRAL = 50.0
NO_TIE_BREAK = "none"
BEST_FIT = "best-fit"
TIE_BREAKS = (NO_TIE_BREAK, BEST_FIT)
DEFAULTS = {"tie_break": BEST_FIT, "cpu_weight": 1, "gap_weight": 3, "gap_horizon": 50}
PAPER = {"tie_break": NO_TIE_BREAK, "cpu_weight": 0, "gap_weight": 0}
MAX_CPU_WEIGHT = 10
MAX_GAP_WEIGHT = 10
GAP_HORIZONS = (1, 100_000)      # arrivals
DEDUPLICATE_FROM = 32   # rows; below this, finding the distinct states costs more than it saves
# The most best fit adds to a total: below a whole score point.
FIT_SHARE = 0.999
# Best fit's figures of a row (`_fit_figures`): the idle cards and free cores, then what each is divided by.
FIT_DIVIDED = 2


class Fgd(RowPlugin):
    name = NAME

    def __init__(self, workload_source: Callable[[], TargetWorkload] | None = None, *,
                 tie_break: str = NO_TIE_BREAK, cpu_weight: float = 0.0, gap_weight: float = 0.0,
                 gap_horizon: float = DEFAULTS["gap_horizon"]) -> None:
        # The bare mechanism (the paper's FGD); `factory` gives the settings an admin gets (DEFAULTS).
        self.tie_break = tie_break
        self.cpu_weight = cpu_weight
        self.gap_weight = gap_weight
        self.gap_horizon = gap_horizon
        # The table of the last scoring, whose cache the card choice for the chosen node reuses.
        self._scored_table: NodeTable | None = None
        self._workload_source = workload_source or recent.recent_workload

    def use_workload(self, workload: TargetWorkload) -> None:
        """Measure against a fixed workload (a replay's trace) instead of the recent tasks."""
        self._workload_source = lambda: workload

    def workload(self) -> TargetWorkload:
        return self._workload_source()

    def score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        self._scored_table = table
        growth = self.growth(table, task, rows)
        if growth is None:
            return np.full(len(rows), NEUTRAL)
        score = 100.0 / (1.0 + np.exp(clipped(growth, -50.0, 50.0)))
        if self.tie_break != BEST_FIT:
            return score
        # Whole score points (growths a few hundredths of a card apart are a tie); PostScore breaks the ties.
        if state is not None:
            state[NAME] = table
        return np.floor(score)

    def post_score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray,
                        totals: np.ndarray) -> np.ndarray:
        """Best fit breaks the ties of the totals, once every scorer has scored (kube-scheduler's NormalizeScore
        point): a tie-break of fgd's own score alone would be lost in the sum, or outweigh other scorers' points.
        Only after fgd scored these rows in whole points (best-fit, with a target workload)."""
        if state.get(NAME) is not table or not len(rows):
            return totals
        return totals + FIT_SHARE * self._fit(table, task, rows)

    def _fit(self, table: NodeTable, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """Best fit, in [0, 1]: how little of its GPU capacity and CPU the node keeps after the task (1 = none)."""
        cache = table.plugin_cache[NAME]
        figures = _current_rows(cache["fit"], table, rows, lambda stale: _fit_figures(
            cache, table, stale, frag.table_state(table, stale, cache["cores"])))
        if task.gpu_required:
            taken = np.array((float(task.gpu_required), task.cpu_cores))
        elif task.is_fractional:
            share = task.gpu_memory_mb / cache["largest_card_mb"][rows]
            taken = np.column_stack((share, np.full(len(rows), task.cpu_cores)))
        else:
            taken = np.array((0.0, task.cpu_cores))
        # The idle cards and free cores left, each over the node's own.
        left = clipped((figures[:, :FIT_DIVIDED] - taken) / figures[:, FIT_DIVIDED:], 0.0, 1.0)
        return 1 - left.sum(axis=1) / 2

    def growth(self, table: NodeTable, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        """ΔF per row for placing `task` there (the best card for a shard); None without a target workload."""
        cache = self._cache(table)
        if cache is None:
            return None
        growth = self._growth_with_gaps(cache, table, task, rows)
        return growth.min(axis=1) if task.is_fractional else growth

    def _growth_with_gaps(self, cache: dict[str, Any], table: NodeTable, task: TaskInfo,
                          rows: np.ndarray) -> np.ndarray:
        """ΔF per row, or per row × card for a shard (+inf where it can't go) with `gap_weight` × the card's gap
        growth added; both come from the cache, computed for the rows changed since."""
        key = _task_key(task)
        if key not in cache["tasks"]:
            cache["tasks"][key] = _per_row(table, *((table.width,) if task.is_fractional else ()))
        growth = _current_rows(cache["tasks"][key], table, rows,
                               lambda stale: self._growth_by_card(cache, table, task, stale))
        if task.is_fractional and self.gap_weight:
            growth += self.gap_weight * self._gap_growth(cache, table, rows, task.gpu_memory_mb)
        return growth

    def _gap_growth(self, cache: dict[str, Any], table: NodeTable, rows: np.ndarray, shard_mb: int) -> np.ndarray:
        """rows × cards: `GapTable.growth` of a `shard_mb` shard, kept per row version for every task shape of that
        shard size (it reads the row's cards only), computed for the rows changed since."""
        gaps = cache["gaps"].get(self.gap_horizon)
        if gaps is None:
            gaps = cache["gaps"][self.gap_horizon] = GapTable(cache["workload"], self.gap_horizon)
        key = (self.gap_horizon, shard_mb)
        if key not in cache["gap_growth"]:
            cache["gap_growth"][key] = _per_row(table, table.width)
        return _current_rows(cache["gap_growth"][key], table, rows, lambda stale: gaps.growth(table, stale, shard_mb))

    def reserve(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> list[int] | None:
        """Reserve: the card for a shard whose fragmentation growth is least (ties → the lowest index) among the
        cards the built-in choice would accept (the shard's tenants rule included); None for other tasks."""
        if not task.is_fractional:
            return None
        table = self._scored_table
        row = table.row_of.get(node.id) if table is not None else None
        if row is None or table.nodes[row] is not node:
            table, row = single_row_table(node, state.config), 0
        cache = self._cache(table)
        if cache is None:
            return None
        growth = self._growth_with_gaps(cache, table, task, np.array([row]))[0]
        cards = node.cards[: table.width]
        eligible = [(value, column) for column, value in enumerate(growth.tolist())
                    if np.isfinite(value) and card_admits_tenant(cards[column], task.tenant_id, state.tenancy)]
        if not eligible:
            return None
        return [cards[min(eligible)[1]].index]

    def _cache(self, table: NodeTable) -> dict[str, Any] | None:
        workload = self.workload()
        if not workload:
            return None
        cache = table.plugin_cache.get(NAME)
        # The cache is the table's, which other fgd instances (other settings, in a preview) may score too.
        if cache is None or cache["workload"] is not workload or cache["cpu_weight"] != self.cpu_weight:
            cores = np.array([float(node.cpu_cores) for node in table.nodes])
            shapes = frag.ShapeArrays(workload, table, cpu_weight=self.cpu_weight)
            # Rows whose cards every shape sees alike share an id (needed to tell equal states apart).
            by_row = np.moveaxis(shapes.masks, 0, 1).reshape(table.size, -1)
            mask_ids = np.unique(by_row, axis=0, return_inverse=True)[1].ravel() if by_row.shape[1] \
                else np.zeros(table.size, np.int64)
            cache = table.plugin_cache[NAME] = {
                "workload": workload, "cpu_weight": self.cpu_weight, "shapes": shapes, "cores": cores,
                "mask_ids": mask_ids,
                "before": _per_row(table), "tasks": {}, "masks": {}, "fit": _per_row(table, 2 * FIT_DIVIDED),
                "cpu_divisor": np.maximum(cores, 1),
                "largest_card_mb": np.maximum(table.card_capacity_mb.max(axis=1), 1),
                "gaps": {}, "gap_growth": {},
            }
        return cache

    @staticmethod
    def _before_and_after(cache: dict[str, Any], table: NodeTable, rows: np.ndarray,
                          now: Callable[[np.ndarray], frag.Measured],
                          after: frag.Measured) -> tuple[np.ndarray, np.ndarray]:
        """F of `rows` as they are (kept per row version for every task shape; `now(positions)` measures those of
        `rows` whose F went stale) and F of the `after` states: one `fragmentation_of` call for both."""
        values, versions = cache["before"]
        stale = np.flatnonzero(versions[rows] != table.row_version[rows])
        if not len(stale):
            return values[rows], frag.fragmentation_of(after, cache["shapes"])
        both = frag.fragmentation_of(now(stale).joined(after), cache["shapes"])
        _keep_rows(cache["before"], table, rows[stale], both[: len(stale)])
        return values[rows], both[len(stale):]

    def _growth_by_card(self, cache: dict[str, Any], table: NodeTable, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """ΔF per row (whole-card and CPU-only tasks) or per row × card (shards; +inf where the shard can't go).

        Many rows are in the same state (empty nodes of one model, full nodes): each distinct state is computed
        once."""
        state = _table_state(cache, table, rows)
        mask = self._task_mask(cache, table, task)[rows]
        if len(rows) > DEDUPLICATE_FROM:
            columns = [state.idle, state.free_mb, state.whole_ok, state.share_ok, state.cpu_free, mask,
                       cache["mask_ids"][rows]]
            if task.is_fractional:
                columns.append(table.card_compute_left[rows])
            signature = np.column_stack(columns)
            # Rows as opaque byte strings: equal bytes are equal states, and a 1-D unique sorts far faster.
            signature = np.ascontiguousarray(signature, dtype=float)
            keys = signature.view(np.dtype((np.void, signature.dtype.itemsize * signature.shape[1]))).ravel()
            _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            if len(first) < len(rows):
                return self._growth_of(cache, table, task, rows[first], state.take(first), mask[first])[inverse.ravel()]
        return self._growth_of(cache, table, task, rows, state, mask)

    def _growth_of(self, cache: dict[str, Any], table: NodeTable, task: TaskInfo, rows: np.ndarray,
                   state: frag.CardState, mask: np.ndarray) -> np.ndarray:
        cpu = float(task.cpu_cores)
        shapes = cache["shapes"]
        if task.is_fractional:
            eligible = mask & state.share_ok & table.shard_room(task, rows)
            # Only the cards the shard can take are measured: the others' ΔF is +inf whatever F would be.
            placed = np.flatnonzero(eligible)
            shards = frag.after_shards(state, table.card_capacity_mb[rows], task.gpu_memory_mb, cpu).take(placed)

            def measured_now(stale: np.ndarray) -> frag.Measured:
                return frag.measured(state.take(stale) if len(stale) < len(rows) else state, rows[stale], shapes)

            before, after = self._before_and_after(cache, table, rows, measured_now,
                                                   frag.measured(shards, np.repeat(rows, table.width)[placed], shapes))
            values = np.full(eligible.size, np.inf)
            values[placed] = after
            return np.where(eligible, values.reshape(eligible.shape) - before[:, None], np.inf)
        # A whole-card (or CPU-only) task's after-states are these states less the cards it takes.
        taken = frag.cards_for_whole(state, mask, task.gpu_required, task.gpu_memory_mb) if task.gpu_required > 0 \
            else None
        now = frag.measured(state, rows, shapes)
        before, after = self._before_and_after(cache, table, rows,
                                               lambda stale: now.take(stale) if len(stale) < len(rows) else now,
                                               now.after_whole(taken, cpu))
        return after - before

    @staticmethod
    def _task_mask(cache: dict[str, Any], table: NodeTable, task: TaskInfo) -> np.ndarray:
        key = (task.gpu_type, str(task.labels.get(MODEL_LABEL, "")).strip())
        if key not in cache["masks"]:
            cache["masks"][key] = frag.card_mask(table, *key)
        return cache["masks"][key]


def _per_row(table: NodeTable, *cards: int) -> tuple[np.ndarray, np.ndarray]:
    """A cache of a value per table row (per row and card with `cards`): the values, and the row version each was
    computed at (-1: never)."""
    return np.zeros((table.size, *cards)), np.full(table.size, -1)


def _current_rows(kept: tuple[np.ndarray, np.ndarray], table: NodeTable, rows: np.ndarray,
                  compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """`rows`' values from a `_per_row` cache, `compute(stale)` giving those of the rows changed since."""
    values, versions = kept
    stale = rows[versions[rows] != table.row_version[rows]]
    if len(stale):
        _keep_rows(kept, table, stale, compute(stale))
    return values[rows]


def _keep_rows(kept: tuple[np.ndarray, np.ndarray], table: NodeTable, rows: np.ndarray, values: np.ndarray) -> None:
    """Store `rows`' values in a `_per_row` cache, as of the rows' current versions."""
    kept[0][rows] = values
    kept[1][rows] = table.row_version[rows]


def _table_state(cache: dict[str, Any], table: NodeTable, rows: np.ndarray) -> frag.CardState:
    """The card state of `rows`; what best fit reads of them is kept on the way (so that a scoring measures a changed
    row once)."""
    state = frag.table_state(table, rows, cache["cores"])
    _keep_rows(cache["fit"], table, rows, _fit_figures(cache, table, rows, state))
    return state


def _fit_figures(cache: dict[str, Any], table: NodeTable, rows: np.ndarray, state: frag.CardState) -> np.ndarray:
    """What best fit reads of `rows` (in `state`): their idle cards and free cores, then the cards and cores each is
    divided by (at least 1)."""
    return np.column_stack((state.idle.sum(axis=1), state.cpu_free, table.card_divisor[rows],
                            cache["cpu_divisor"][rows]))


def _task_key(task: TaskInfo) -> tuple:
    return (task.gpu_required, task.gpu_memory_mb, task.gpu_compute_percent, float(task.cpu_cores), task.gpu_type,
            str(task.labels.get(MODEL_LABEL, "")).strip())


SETTINGS_SCHEMA = {"type": "object", "additionalProperties": False, "properties": {
    "tie_break": {"type": "string", "enum": list(TIE_BREAKS), "default": DEFAULTS["tie_break"],
                  "description": "best-fit: whole score points, ties to the node left with the least GPU and CPU"},
    "cpu_weight": {"type": "number", "minimum": 0, "maximum": MAX_CPU_WEIGHT, "default": DEFAULTS["cpu_weight"],
                   "description": "weight of the idle cards the node's free CPU cannot feed"},
    "gap_weight": {"type": "number", "minimum": 0, "maximum": MAX_GAP_WEIGHT, "default": DEFAULTS["gap_weight"],
                   "description": "weight of the waste a shard's card gap finally leaves"},
    "gap_horizon": {"type": "number", "minimum": GAP_HORIZONS[0], "maximum": GAP_HORIZONS[1],
                    "default": DEFAULTS["gap_horizon"], "description": "arrivals a gap waits for a task to fill it"},
}}


def factory(setting: PluginSetting) -> Fgd:
    settings = {**DEFAULTS, **setting.extra}
    return Fgd(tie_break=settings["tie_break"], cpu_weight=float(settings["cpu_weight"]),
               gap_weight=float(settings["gap_weight"]), gap_horizon=float(settings["gap_horizon"]))


def fragmentation_summary(nodes: list[NodeInfo], config: SchedulerConfig) -> dict[str, Any]:
    """fgd's measure (design §15.9) over `nodes`: the idle card capacity the recent tasks' shapes could not use,
    against all idle capacity, in cards."""
    workload = recent.recent_workload()
    if not workload or not nodes:
        return {"fragmented": 0.0, "idle": 0.0, "shapes": len(workload.shapes), "tasks": workload.counted}
    fragmented, idle = cluster_fragmentation(NodeTable(nodes, config), workload)
    return {"fragmented": round(fragmented, 2), "idle": round(idle, 2), "shapes": len(workload.shapes),
            "tasks": workload.counted}


def target_workload_summary() -> dict[str, Any]:
    """The target workload as the scheduler sees it: the recent-task window's most common shapes."""
    workload = recent.recent_workload()
    return {"window": recent.WINDOW, "counted": workload.counted,
            "shapes": [{"label": shape.label(), "percent": 100 * share}
                       for shape, share in zip(workload.shapes, workload.popularity)]}


SPEC = PluginSpec(NAME, factory, exclusive_with=("spread", "binpack"), default=PluginSetting(NAME, False, 0, DEFAULTS),
                  kinds=frozenset({SCORE, POST_SCORE, RESERVE}), settings_schema=SETTINGS_SCHEMA,
                  on_tasks_created=recent.record_shapes, restore_state=recent.restore_window,
                  description="Prefers the node and card where GPU fragmentation, measured against the recent "
                              "tasks' shapes, grows least (Fragmentation Gradient Descent).")
