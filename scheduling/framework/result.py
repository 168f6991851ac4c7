"""The outcome of one scheduling attempt (`Framework.schedule`): the chosen node, or the design §12 code and the
counted reasons why none, with per-node filter and score results built only when someone reads them."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from scheduling.framework.snapshot import NodeInfo, TaskInfo
from scheduling.framework.status import Code, Status
from scheduling.framework.table import NodeTable

DIAGNOSTIC_FEASIBLE_NODES = 50


@dataclass(frozen=True)
class Rejection:
    plugin: str
    reason: str
    resolvable: bool
    attempt_code: str = ""


@dataclass
class ScheduleResult:
    """The outcome of one attempt. `node` is None when nothing fits; then `code` is a design §12 code.

    `message` is the summary line `0/N nodes are available: …` (also on success, where it reads `k/N …`); when
    a PreFilter refused the task (`pre_filtered`), it is that refusal and no node was looked at.
    """

    task: TaskInfo
    node: NodeInfo | None
    code: str | None
    message: str
    total_nodes: int
    _table: NodeTable = field(repr=False)
    _rejected_by: np.ndarray = field(repr=False)       # per table row: 0 feasible, else 1 + index in _rejections
    _rejections: list[Rejection] = field(repr=False)
    _feasible_rows: np.ndarray = field(repr=False)
    _scorer_names: list[str] = field(repr=False)
    _score_matrix: np.ndarray = field(repr=False)      # scorers × feasible rows
    _total_scores: np.ndarray = field(repr=False)
    pre_filtered: bool = False

    @property
    def filtered(self) -> dict[int, Status]:
        """node id → the Status of the first filter that rejected it."""
        statuses = self._rejection_statuses
        nodes = self._table.nodes
        rows = np.flatnonzero(self._rejected_by)
        return {nodes[row].id: statuses[index - 1] for row, index in zip(rows.tolist(),
                                                                         self._rejected_by[rows].tolist())}

    def rejection(self, node_id: int) -> Status | None:
        """`filtered.get(node_id)` without building the dict (preemption asks node by node)."""
        row = self._table.row_of.get(node_id)
        if row is None or not self._rejected_by[row]:
            return None
        return self._rejection_statuses[self._rejected_by[row] - 1]

    def unresolvable_reasons(self) -> dict[int, str]:
        """node id → reason, for the nodes a filter rejected whatever is freed (UnschedulableAndUnresolvable)."""
        incurable = [index + 1 for index, rejection in enumerate(self._rejections) if not rejection.resolvable]
        rows = np.flatnonzero(np.isin(self._rejected_by, incurable))
        nodes, rejections = self._table.nodes, self._rejections
        return {nodes[row].id: rejections[index - 1].reason
                for row, index in zip(rows.tolist(), self._rejected_by[rows].tolist())}

    @cached_property
    def _rejection_statuses(self) -> list[Status]:
        # A few distinct rejections per attempt, shared by every node they rejected (Status is frozen).
        return [Status(Code.UNSCHEDULABLE if rejection.resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                       (rejection.reason,), rejection.plugin) for rejection in self._rejections]

    @property
    def scores(self) -> dict[int, dict[str, float]]:
        """node id → {plugin name: raw score} for every feasible node."""
        return {self._table.nodes[row].id: self._scores_at(position)
                for position, row in enumerate(self._feasible_rows)}

    @property
    def totals(self) -> dict[int, float]:
        """node id → Σ weight × score for every feasible node."""
        return {self._table.nodes[row].id: float(total) for row, total in zip(self._feasible_rows, self._total_scores)}

    def ranked_node_ids(self) -> Iterator[int]:
        """Ids of the feasible nodes, best total first (ties in node order): `totals` sorted, without the dict; one
        at a time, as a refused bind needs only the next few of up to 20,000."""
        order = np.argsort(-self._total_scores, kind="stable")
        nodes = self._table.nodes
        for row in self._feasible_rows[order].tolist():
            yield nodes[row].id

    def reason_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for rejection, count in self._rejections_counted:
            counts[rejection.reason] = counts.get(rejection.reason, 0) + count
        return counts

    def rejections_seen(self) -> list[Rejection]:
        """The distinct rejections of this attempt's nodes, in the framework's order."""
        return [rejection for rejection, _ in self._rejections_counted]

    @cached_property
    def _rejections_counted(self) -> list[tuple[Rejection, int]]:
        per_rejection = np.bincount(self._rejected_by, minlength=len(self._rejections) + 1)[1:]
        return [(self._rejections[index], count) for index, count in enumerate(per_rejection.tolist()) if count]

    def filtered_by_reason(self, limit: int | None = None) -> dict[str, list[str]]:
        """reason → names of the nodes filtered for it (the first `limit` filtered nodes in node order, when
        given), no per-node dict."""
        rows = np.flatnonzero(self._rejected_by)
        if limit is not None:
            rows = rows[:limit]
        # One stable sort by rejection: each rejection's nodes are then a slice, still in node order.
        indices = self._rejected_by[rows]
        order = indices.argsort(kind="stable")
        indices = indices[order].tolist()
        names = self._table.name_array[rows[order]].tolist()
        grouped: dict[str, list[str]] = {}
        start = 0
        while start < len(names):
            end = bisect_right(indices, indices[start], start)
            grouped.setdefault(self._rejections[indices[start] - 1].reason, []).extend(names[start:end])
            start = end
        return grouped

    @property
    def filtered_count(self) -> int:
        return int(np.count_nonzero(self._rejected_by))

    def compact_diagnostics(self, limit: int = DIAGNOSTIC_FEASIBLE_NODES,
                            filtered_limit: int | None = None) -> dict[str, Any]:
        """Per-node diagnostics in the form an attempt stores: `{"filtered": {reason: [names]}, "plugins": [scorer
        names], "scored": [[name, total, *scores in plugins' order]]}`, the best `limit` feasible nodes first.
        No per-node dict: a filtered node costs its name."""
        names = self._table.names
        best = self._best_positions(limit)
        rows = [[names[row], total, *scores] for row, total, scores in zip(
            self._feasible_rows[best].tolist(), self._total_scores[best].round(3).tolist(),
            self._score_matrix[:, best].round(3).T.tolist())]
        return {"filtered": self.filtered_by_reason(filtered_limit), "plugins": list(self._scorer_names), "scored": rows}

    def _best_positions(self, limit: int) -> np.ndarray:
        """Positions of the best `limit` feasible nodes, best total first."""
        negated = -self._total_scores
        if len(negated) > limit:
            best = negated.argpartition(limit - 1)[:limit]
            return best[negated[best].argsort(kind="stable")]
        return negated.argsort(kind="stable")

    def _scores_at(self, position: int) -> dict[str, float]:
        return {name: round(float(self._score_matrix[index, position]), 3)
                for index, name in enumerate(self._scorer_names)}


@dataclass
class Placing:
    """What `Framework.place` did with a task: the attempt (`result`), and, when a node was picked, the cards
    Reserve chose there. `refusal`: why it was not placed there (Permit's, or no cards); `placed`: applied to the
    snapshot."""

    result: ScheduleResult
    node: NodeInfo | None = None
    cards: list[int] = field(default_factory=list)
    refusal: Status | None = None

    @property
    def placed(self) -> bool:
        return self.node is not None and self.refusal is None
