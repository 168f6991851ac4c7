"""Runs the extension points for one task over an in-memory snapshot (design §4–§5.3). Every extension point is
run here and nowhere else; the cycle (`scheduling/cycle/run.py`) calls them in kube-scheduler's order:

    framework = Framework(plugin_set, SchedulerConfig.from_settings())
    result = framework.schedule(task, snapshot, rng)     # PreFilter → Filter → PreScore → Score → PostScore
    if result.node is None:
        outcome = framework.post_filter(task, result, snapshot, handle=...)   # PostFilter (preemption)
    else:
        cards = framework.reserve(task, result.node, snapshot.tenancy)        # Reserve (design §5.3)
        status = framework.permit([(task, result.node, cards)])               # Permit
        apply_bind(snapshot, task, result.node, cards)   # the next task sees the usage (framework/occupancy.py)
        framework.bind(placements, default_binder=..., plugin_outcome=...)    # Bind (default: scheduling/bind/)

Filter order is decided in one place, `_filter_order`: the framework's chain (availability → tenant → reservation
→ resource pre-filter → single-tenant runtime → affinity: `scheduling.plugins.FRAMEWORK_CHAIN`) with the gpu-filter
right after its tenant step, then the other plugin filters in registry order.

A cycle that keeps many results alive runs with the garbage collector paused (`scheduling.cycle.collector`): the
diagnostics of thousands of filtered nodes per task otherwise trigger full collections that walk the whole
snapshot, which at 5,000 nodes costs more than scheduling itself.

Filters run over shrinking arrays of table rows (`scheduling.framework.table`), so each rule is a few NumPy
operations per attempt instead of a Python call per node; the per-node results (`filtered`, `scores`, `totals`)
are built only when someone reads them.

Filter codes and scores of the row plugins are shared by the tasks of one equivalence class, within a cycle and
across cycles over the scheduler cache's table (`scheduling.framework.equivalence`): a later task of the class pays
only for the rows changed since.

Beside this module: `result` (what an attempt returns), `reserve` (the built-in card choice) and `occupancy`
(assume/forget a placement on a node).
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import is_dataclass, replace
from typing import Any, TypeVar

import numpy as np

from scheduling.framework import reasons
from scheduling.framework.cards import ChosenCards, card_groups
from scheduling.framework.equivalence import EVERY_ROW_PASSES, EquivalenceCache, equivalence_cache
from scheduling.framework.interfaces import (CycleState, PostFilterOutcome, RowFilterPlugin, RowPlugin,
                                             RowPostScorePlugin, RowScorePlugin)
from scheduling.framework.occupancy import apply_bind, emptied
from scheduling.framework.registry import PluginSet
from scheduling.framework.reserve import default_cards
from scheduling.framework.result import Placing, Rejection, ScheduleResult
from scheduling.framework.single_tenant import takes_cards
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo, TenancyView
from scheduling.framework.status import SUCCESS, Code, Status
from scheduling.framework.table import NodeTable, table_for

logger = logging.getLogger(__name__)

# The always-on gpu-filter runs right after the chain's tenant step (see `_filter_order`).
GPU_FILTER = "gpu-filter"
TENANT_STEP = "tenant"
P = TypeVar("P")
O = TypeVar("O")
# Totals closer than this are a tie (float sums of the same scores in another order differ in the last bits).
TIE_TOLERANCE = 1e-9


class Framework:
    """One configured scheduler: a plugin set and the design §13 figures. Holds no per-cycle state."""

    def __init__(self, plugin_set: PluginSet, config: SchedulerConfig) -> None:
        self.plugin_set = plugin_set
        self.config = config
        self._pre_filters = plugin_set.pre_filters
        self._filters = _filter_order(plugin_set.filters)
        self._rejections: list[Rejection] = []
        self._rejection_ids: dict[tuple[str, str, bool], int] = {}
        # Per filter: row code → rejection id (+1), so a filter's local reason codes map in one indexing step.
        self._code_maps = [self._code_map(plugin) for plugin in self._filters]
        self._row_scorers = [isinstance(plugin, RowScorePlugin) for plugin, _ in plugin_set.scorers]
        self._post_scorers = [(plugin, isinstance(plugin, RowPostScorePlugin)) for plugin in plugin_set.post_scorers]
        # Equivalence keys (`scheduling.framework.equivalence`), None where results are not shared.
        self._filter_keys = [getattr(plugin, "filter_key", None) if code_map is not None else None
                             for plugin, code_map in zip(self._filters, self._code_maps)]
        self._score_keys = [getattr(plugin, "score_key", None) if by_rows else None
                            for (plugin, _), by_rows in zip(plugin_set.scorers, self._row_scorers)]
        # Shared scores stay right beside a PreScore plugin that prepares only its own scores (a scorer with a key,
        # which covers what it prepared: topology); one that prepares for others may change any score.
        keyed = [plugin for (plugin, _), key in zip(plugin_set.scorers, self._score_keys) if key is not None]
        self._scores_shared = all(any(plugin is scorer for scorer in keyed) for plugin in plugin_set.pre_scorers)
        # What the shared results depend on besides the table: the plugins (the same settings make the same plugins;
        # a set put together by hand is only itself).
        self._plugins_context = plugin_set.settings if plugin_set.settings is not None else plugin_set

    def describe(self) -> dict[str, Any]:
        """design §14 `GET /scheduler/plugins` body: {filters, scorers: [{name, weight}], preempt_stage}."""
        return self.plugin_set.describe()

    def schedule(self, task: TaskInfo, snapshot: ClusterSnapshot, rng: random.Random, *,
                 admitted: bool = False) -> ScheduleResult:
        """PreFilter → Filter (the framework's chain and the plugins) → PreScore → Score → PostScore; pick the best total,
        ties at random (one draw from `rng`). The snapshot is only read; `apply_bind` records a bind.
        `admitted`: the PreFilters already ran for the task's gang as a whole (`pre_filter_gang`)."""
        table = table_for(snapshot, self.config)
        state = CycleState(self.config, snapshot.tenancy)
        rejected_by = np.zeros(table.size, np.int32)
        if not admitted:
            status = self._run_pre_filters(state, task, snapshot)
            if not status.is_success:
                return self._pre_filtered(task, table, rejected_by, status)

        cache = self._equivalence(snapshot, table)
        rows = self._filter(task, table, state, cache, rejected_by)

        for plugin in self.plugin_set.pre_scorers:
            status = plugin.pre_score(state, task, snapshot)
            if not status.is_success:
                rejected_by[:] = self._rejection_id(plugin.name, status.reason or "pre-score failed", False) + 1
                return self._result(task, table, rejected_by, np.zeros(0, np.int64), [], np.zeros((0, 0)), rng)

        names = [plugin.name for plugin, _ in self.plugin_set.scorers]
        matrix = np.empty((len(names), len(rows)))
        for index, ((plugin, _), by_rows, score_key) in enumerate(
                zip(self.plugin_set.scorers, self._row_scorers, self._score_keys)):
            key = score_key(task, table) if score_key is not None and self._scores_shared else None
            if key is None:
                matrix[index] = self._score(plugin, by_rows, state, task, table, rows)
                continue
            every_row = cache.rows(("score", index), key,
                                   lambda some: self._score(plugin, True, state, task, table, some),
                                   follows_usage=plugin.follows_usage)
            matrix[index] = every_row[rows]
        return self._result(task, table, rejected_by, rows, names, matrix, rng, state)

    def place(self, task: TaskInfo, snapshot: ClusterSnapshot, rng: random.Random, *,
              pick: Callable[[ScheduleResult], NodeInfo | None] | None = None, cards_required: bool = False,
              apply: Callable[[ClusterSnapshot, TaskInfo, NodeInfo, list[int]], None] = apply_bind) -> Placing:
        """THE in-memory placement step of the cycle, the what-if preview and the trace replay: `schedule`, then on
        the node `pick` takes from the result (default: the chosen one) `reserve` → `permit` → `apply` (default
        `apply_bind`: the next task sees the placement). `cards_required`: a task that needs cards and got none from
        Reserve is not placed (the replay has no bind to choose them again)."""
        result = self.schedule(task, snapshot, rng)
        node = result.node if result.node is None or pick is None else pick(result)
        if node is None:
            return Placing(result)
        cards = self.reserve(task, node, snapshot.tenancy)
        if cards_required and takes_cards(task) and not cards:
            return Placing(result, node, cards, Status.unschedulable(f"no cards for the task on node {node.name}",
                                                                     plugin="reserve"))
        permit = self.permit([(task, node, cards)], tenancy=snapshot.tenancy)
        if not permit.is_success:
            return Placing(result, node, cards, permit)
        apply(snapshot, task, node, cards)
        return Placing(result, node, cards)

    def pre_filter(self, task: TaskInfo, snapshot: ClusterSnapshot) -> Status:
        """PreFilter alone: whether the task may be scheduled at all now (its tenant active, its quota, the PreFilter
        plugins), whatever the nodes."""
        return self._run_pre_filters(CycleState(self.config, snapshot.tenancy), task, snapshot)

    def feasible_nodes(self, task: TaskInfo, snapshot: ClusterSnapshot) -> list[NodeInfo]:
        """Filter alone (the framework's chain and the plugin filters, no PreFilter): the nodes that could take the
        task now."""
        table = table_for(snapshot, self.config)
        rejected_by = np.zeros(table.size, np.int32)
        rows = self._filter(task, table, CycleState(self.config, snapshot.tenancy), self._equivalence(snapshot, table),
                            rejected_by)
        return [table.nodes[row] for row in rows.tolist()]

    def node_rejection(self, task: TaskInfo, table: NodeTable, row: int,
                       tenancy: TenancyView | None = None) -> Rejection | None:
        """The filters, in order, on one row of a table as it is: the first rejection, or None when the node passes
        (bind's re-check of its live nodes, design §5.2)."""
        state = CycleState(self.config, tenancy)
        rows = np.array([row], np.int64)
        for plugin, code_map in zip(self._filters, self._code_maps):
            code = int(self._filter_codes(plugin, code_map, state, task, table, rows)[0])
            if code:
                return self._rejections[code - 1]
        return None

    def once_emptied(self, snapshot: ClusterSnapshot) -> Callable[[TaskInfo, NodeInfo], bool]:
        """Whether a node of the snapshot could take a task once its tasks were gone (the reserved job's and
        defrag's question, design §16.3): the filters run over a copy of the snapshot with every node `emptied`,
        built at the first question, once per task for every node. The snapshot as it is now: ask again after it
        changes."""
        holders: dict[int, frozenset[int]] = {}
        copy: list[ClusterSnapshot] = []

        def could_hold(task: TaskInfo, node: NodeInfo) -> bool:
            if task.id not in holders:
                if not copy:
                    copy.append(ClusterSnapshot(nodes=[emptied(each) for each in snapshot.nodes],
                                                tenancy=snapshot.tenancy))
                holders[task.id] = frozenset(each.id for each in self.feasible_nodes(task, copy[0]))
            return node.id in holders[task.id]

        return could_hold

    def pre_filter_gang(self, members: Sequence[TaskInfo], snapshot: ClusterSnapshot) -> Status:
        """PreFilter for a gang, once with its totals: the members as one task asking for all their cards (the
        tenant's quota admits the gang whole or not at all). Its members are then scheduled `admitted`."""
        gang = replace(members[0], gpu_required=sum(member.gpu_required for member in members))
        return self._run_pre_filters(CycleState(self.config, snapshot.tenancy), gang, snapshot)

    def _equivalence(self, snapshot: ClusterSnapshot, table: NodeTable) -> EquivalenceCache:
        """The results this framework shares over the table: with earlier frameworks of the same plugins and share
        groups (earlier cycles)."""
        return equivalence_cache(snapshot, table, self, (self._plugins_context, snapshot.tenancy))

    def _run_pre_filters(self, state: CycleState, task: TaskInfo, snapshot: ClusterSnapshot) -> Status:
        for plugin in self._pre_filters:
            status = plugin.pre_filter(state, task, snapshot)
            if not status.is_success:
                return status
        return SUCCESS

    def _filter(self, task: TaskInfo, table: NodeTable, state: CycleState, cache: EquivalenceCache,
                rejected_by: np.ndarray) -> np.ndarray:
        """Run the filters in order, each row's first rejection into `rejected_by`; the rows left feasible.

        A filter with an equivalence key gives its codes for every row from the cache; a run of such filters is
        applied last one first, so each row ends with the reason of the first that rejects it. Any other filter sees
        only the rows the filters before it left, as it always did."""
        shared: list[tuple[np.ndarray, np.ndarray]] = []
        for slot, (plugin, code_map, filter_key) in enumerate(zip(self._filters, self._code_maps, self._filter_keys)):
            key = filter_key(task, table) if filter_key is not None else None
            if key is EVERY_ROW_PASSES:
                continue
            if key is not None:
                codes = cache.codes(("filter", slot), key,
                                    lambda some: code_map[plugin.filter_rows(state, task, table, some)],
                                    follows_usage=plugin.follows_usage)
                if codes is not None:
                    shared.append(codes)
                continue
            _apply_last_first(rejected_by, shared)
            rows = np.flatnonzero(rejected_by == 0)
            if not len(rows):
                continue
            codes = self._filter_codes(plugin, code_map, state, task, table, rows)
            failing = codes != 0
            rejected_by[rows[failing]] = codes[failing]
        _apply_last_first(rejected_by, shared)
        return np.flatnonzero(rejected_by == 0)

    def post_filter(self, task: TaskInfo, result: ScheduleResult, snapshot: ClusterSnapshot, *,
                    handle: Any = None) -> PostFilterOutcome | None:
        """PostFilter, for a task no node could take: the first plugin outcome that changed the attempt's code
        (preemption's or defrag's PreemptionPending), else the first outcome with what the later ones said appended
        (why nothing could be done), else None. An outcome keeping the failure's code did nothing, so the next plugin
        gets its turn, as in kube-scheduler. `handle` is what the caller lends plugins to act with (the cycle's
        preemption service)."""
        if result.node is not None or result.pre_filtered:
            return None
        state = CycleState(self.config, snapshot.tenancy, handle)
        first = None
        for plugin in self.plugin_set.post_filters:
            outcome = plugin.post_filter(state, task, result, snapshot)
            if outcome is None:
                continue
            if getattr(outcome, "code", None) != result.code:
                return outcome
            if first is None:
                first = outcome
            elif is_dataclass(first):
                said = outcome.message.removeprefix(result.message).strip()
                first = replace(first, message=f"{first.message} {said}")
        return first

    def reserve(self, task: TaskInfo, node: NodeInfo, tenancy: TenancyView | None = None) -> ChosenCards:
        """Reserve: card indexes for `task` on `node` (design §5.3), all of one type (`ChosenCards.card_type`);
        empty when the node cannot hold it or it needs no card. Only cards of one of the task's card groups
        qualify (`cards.card_groups`: its type and gpu-model, design §15.2–§15.3); on a node with several groups the
        best-fitting group that can hold it is used (fewest cards, so larger groups stay whole). Within a group the
        first Reserve plugin with an answer decides (nvlink's NVLink/NUMA choice), else `default_cards`. Pass the
        snapshot's `tenancy` for fractional tasks (without it only cards nobody occupies qualify)."""
        groups = card_groups(task, node)
        if not node.cards or (len(groups) == 1 and len(groups[0][1]) == len(node.cards)):
            return ChosenCards(self._reserve_within(task, node, tenancy), groups[0][0] if groups else "")
        for card_type, cards in sorted(groups, key=lambda group: (len(group[1]), group[0])):
            chosen = self._reserve_within(task, replace(node, cards=cards, cache={}), tenancy)
            if chosen:
                return ChosenCards(chosen, card_type)
        return ChosenCards()

    def _reserve_within(self, task: TaskInfo, node: NodeInfo, tenancy: TenancyView | None) -> list[int]:
        if self.plugin_set.reservers:
            state = CycleState(self.config, tenancy)
            for plugin in self.plugin_set.reservers:
                cards = plugin.reserve(state, task, node)
                if cards is not None:
                    return cards
        return default_cards(task, node, self.config, tenancy=tenancy)

    def permit(self, placements: Sequence[tuple[TaskInfo, NodeInfo, list[int]]], *, world_size: int = 1,
               tenancy: TenancyView | None = None) -> Status:
        """Permit: whether placements that must bind together may go to bind — the chain's gang rule (every one
        of the `world_size` members, or none), then the Permit plugins. The first refusal decides."""
        state = CycleState(self.config, tenancy)
        for plugin in self.plugin_set.permits:
            status = plugin.permit(state, placements, world_size)
            if not status.is_success:
                return status
        return SUCCESS

    def bind(self, placements: Sequence[P], *, default_binder: Callable[[list[P]], list[O]],
             plugin_outcome: Callable[[P, Status], O], tenancy: TenancyView | None = None,
             all_or_nothing: bool = False) -> list[O]:
        """Bind: each placement (with `.task`, `.node`, `.cards`) goes through the Bind plugins in order; one that
        answers SKIP passes it on, and what every plugin skips goes to `default_binder` (the bind pipeline) in one
        batch. A plugin's own answer — SUCCESS: it bound the placement itself; anything else: the bind is
        refused — becomes `plugin_outcome(placement, status)`.

        `all_or_nothing` (a gang, whose `default_binder` binds its batch whole or not at all): the first refusal
        refuses every placement — each gets `plugin_outcome(placement, refusal)` — and nothing goes to the
        default binder. A plugin that binds members itself binds the whole gang: it sees every member."""
        if not self.plugin_set.binders:
            return default_binder(list(placements))
        state = CycleState(self.config, tenancy)
        outcomes: list[O | None] = [None] * len(placements)
        rest: list[int] = []
        for position, placement in enumerate(placements):
            for plugin in self.plugin_set.binders:
                status = plugin.bind(state, placement.task, placement.node, list(placement.cards))
                if status.code != Code.SKIP:
                    if all_or_nothing and status.code != Code.SUCCESS:
                        return [plugin_outcome(each, status) for each in placements]
                    outcomes[position] = plugin_outcome(placement, status)
                    break
            else:
                rest.append(position)
        for position, outcome in zip(rest, default_binder([placements[position] for position in rest])):
            outcomes[position] = outcome
        return outcomes

    def _pre_filtered(self, task, table, rejected_by, status: Status) -> ScheduleResult:
        return ScheduleResult(
            task=task, node=None, code=refusal_code(status), message=status.reason, total_nodes=table.size,
            _table=table, _rejected_by=rejected_by, _rejections=self._rejections, _feasible_rows=np.zeros(0, np.int64),
            _scorer_names=[], _score_matrix=np.zeros((0, 0)), _total_scores=np.zeros(0), pre_filtered=True,
        )

    def _result(self, task, table, rejected_by, rows, names, matrix, rng, state=None) -> ScheduleResult:
        weights = np.array([weight for _, weight in self.plugin_set.scorers], float)
        totals = weights @ matrix if len(names) else np.zeros(len(rows))
        if state is not None:
            for plugin, by_rows in self._post_scorers:
                if by_rows:
                    totals = np.asarray(plugin.post_score_rows(state, task, table, rows, totals), float)
                else:
                    totals = _post_score_by_node(plugin, state, task, table, rows, totals)
        chosen = None
        if len(rows):
            tied = np.flatnonzero(totals >= totals.max() - TIE_TOLERANCE)
            chosen = table.nodes[rows[_pick_tied(tied, rng)]]
        result = ScheduleResult(
            task=task, node=chosen, code=None, message="", total_nodes=table.size, _table=table,
            _rejected_by=rejected_by, _rejections=self._rejections, _feasible_rows=rows, _scorer_names=names,
            _score_matrix=matrix, _total_scores=totals,
        )
        result.message = reasons.summarize(table.size, result.reason_counts())
        if chosen is not None:
            notes = [plugin.summary_note(task, chosen) for plugin, _ in self.plugin_set.scorers
                     if isinstance(plugin, RowPlugin)]
            result.message = " ".join([result.message, *filter(None, notes)])
        if chosen is None:
            result.code = _failure_code(result.rejections_seen())
        return result

    def _filter_codes(self, plugin, code_map, state, task, table, rows) -> np.ndarray:
        if code_map is not None:
            return code_map[plugin.filter_rows(state, task, table, rows)]
        codes = np.zeros(len(rows), np.int32)
        for position, row in enumerate(rows):
            status = plugin.filter(state, task, table.nodes[row])
            if not status.is_success:
                resolvable = status.code == Code.UNSCHEDULABLE
                codes[position] = self._rejection_id(plugin.name, status.reason or "rejected", resolvable,
                                                     status.attempt_code) + 1
        return codes

    @staticmethod
    def _score(plugin, by_rows: bool, state, task, table, rows) -> np.ndarray:
        if by_rows:
            scores = np.asarray(plugin.score_rows(state, task, table, rows), float)
        else:
            scores = np.fromiter((plugin.score(state, task, table.nodes[row]) for row in rows), float, len(rows))
        if math.isfinite(scores.sum()):
            # Finite only when every score is (finite scores whose sum overflows just take the long way).
            return scores
        broken = ~np.isfinite(scores)
        if broken.any():
            # One plugin's NaN or infinity must not decide (or poison) the totals: it counts as 0 (every score
            # passes here, so the totals need no check of their own).
            logger.warning("plugin %s gave %s non-finite score(s) for task %s (first on node %s); counted as 0",
                           plugin.name, int(broken.sum()), task.id, table.nodes[rows[np.argmax(broken)]].name)
            scores = np.where(broken, 0.0, scores)
        return scores

    def _code_map(self, plugin) -> np.ndarray | None:
        if not isinstance(plugin, RowFilterPlugin):
            return None
        ids = [self._rejection_id(plugin.name, reason, reason in plugin.resolvable,
                                  plugin.attempt_codes.get(reason, "")) + 1 for reason in plugin.reasons]
        return np.array([0, *ids], np.int32)

    def _rejection_id(self, plugin: str, reason: str, resolvable: bool, attempt_code: str = "") -> int:
        key = (plugin, reason, resolvable, attempt_code)
        if key not in self._rejection_ids:
            self._rejection_ids[key] = len(self._rejections)
            self._rejections.append(Rejection(plugin, reason, resolvable, attempt_code))
        return self._rejection_ids[key]


def _post_score_by_node(plugin, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray,
                        totals: np.ndarray) -> np.ndarray:
    """A PostScore plugin's `post_score` over a dict of node id → total (the interface a custom plugin implements)."""
    node_ids = [table.nodes[row].id for row in rows.tolist()]
    by_node = dict(zip(node_ids, totals.tolist()))
    plugin.post_score(state, task, by_node)
    return np.fromiter(map(by_node.__getitem__, node_ids), float, len(node_ids))


def _failure_code(seen: list[Rejection]) -> str:
    """The design §12 code of an attempt no node could take, from the rejections its nodes met."""
    special = sorted(rejection.attempt_code for rejection in seen if rejection.attempt_code)
    if special:
        return special[0]
    if any(rejection.resolvable for rejection in seen):
        return reasons.INSUFFICIENT_RESOURCES
    return reasons.NO_SCHEDULABLE_NODES


def refusal_code(status: Status) -> str:
    """The design §12 code of a PreFilter's refusal."""
    return status.attempt_code or (reasons.INSUFFICIENT_RESOURCES if status.code == Code.UNSCHEDULABLE
                                   else reasons.NO_SCHEDULABLE_NODES)


def _apply_last_first(rejected_by: np.ndarray, shared: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Record shared filter codes (codes, rejecting mask) on rows no earlier filter rejected, the earliest winning;
    empties `shared`."""
    if not shared:
        return
    if rejected_by.any():
        still = rejected_by == 0
        for codes, failing in reversed(shared):
            np.copyto(rejected_by, codes, where=failing & still)
    else:
        for codes, failing in reversed(shared):
            np.copyto(rejected_by, codes, where=failing)
    shared.clear()


def _filter_order(plugin_filters: list) -> list:
    """THE filter order: the framework's chain, then the plugin filters in registry order (as the plugin set holds
    them) — except that the always-on gpu-filter runs right after the chain's tenant step: a node of the wrong GPU
    type is reported as a type mismatch (unresolvable, so no preemption is tried for it) rather than as short of cards
    by the resource pre-filter."""
    type_filters = [plugin for plugin in plugin_filters if plugin.name == GPU_FILTER]
    others = [plugin for plugin in plugin_filters if plugin.name != GPU_FILTER]
    after = next((position + 1 for position, plugin in enumerate(others) if plugin.name == TENANT_STEP), 0)
    return [*others[:after], *type_filters, *others[after:]]


def _pick_tied(candidates: np.ndarray, rng: random.Random) -> int:
    """Uniform choice among the tied rows with one draw (a Python draw per tied row cost more than scoring when
    thousands of empty nodes tie)."""
    return int(candidates[rng.randrange(len(candidates))]) if len(candidates) > 1 else int(candidates[0])
