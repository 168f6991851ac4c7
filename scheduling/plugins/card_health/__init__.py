"""card-health (always on): quarantined cards take no work, degraded cards make their node less attractive
(design §17.3).

A quarantined card is held in the snapshot by an occupant that is no task (`hold_quarantined_cards`, called where
snapshots and the bind's live view are built), so every rule that looks for free cards — resource-filter, card
choice, preemption and defrag planning, the bind re-check — passes it over without knowing about health. This
filter runs before resource-filter and names the reason when it is the quarantine that keeps the task off the node:
`CardUnhealthy`, counted in the summary line (`0/12 nodes are available: 1 CardUnhealthy, …`). The score is a
penalty: 0 on a node without degraded cards, down to -100 as the share of its degraded cards grows, so a healthy
cluster's totals are what the other scorers make them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduling.framework.cards import cards_by_key
from scheduling.framework.equivalence import EVERY_ROW_PASSES
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.occupancy import Occupant, assume
from scheduling.framework.registry import FILTER, SCORE, PluginSetting, PluginSpec
from scheduling.framework.snapshot import NodeInfo, TaskInfo
from scheduling.framework.table import NodeTable

NAME = "card-health"
CARD_UNHEALTHY = "CardUnhealthy"
DEGRADED = "degraded"
# The task type of the occupant that holds a quarantined card: no task has it.
QUARANTINE_HOLDER = "quarantine"


def hold_quarantined_cards(node: NodeInfo) -> None:
    """Count each quarantined card of `node` as held (nobody's, outside the `gpu_used` ledger)."""
    quarantined = [card for card in node.cards if card.quarantined]
    if not quarantined:
        return
    by_key = cards_by_key(node)
    for card in quarantined:
        assume(node, Occupant(None, QUARANTINE_HOLDER, (card.index,), card.type), cards=by_key, ledger=False)


def _idle_quarantined(node: NodeInfo) -> int:
    """Quarantined cards no task holds any more: the room the quarantine takes away."""
    return sum(1 for card in node.cards if card.quarantined and card.whole_card_tasks == 1 and not card.shard_tasks)


@dataclass
class _Columns:
    """Per table row: idle quarantined cards and the share of degraded cards, kept for the table's life (a table
    outlives cycles in the snapshot cache) and recomputed only for the rows refreshed since (`table.row_version`,
    which only grows); `any_*` let a healthy cluster skip the rest."""

    idle: np.ndarray
    degraded: np.ndarray
    versions: np.ndarray
    any_idle: bool = False
    any_degraded: bool = False


def _columns(table: NodeTable) -> _Columns:
    columns = table.plugin_cache.get(NAME)
    if columns is None:
        columns = table.plugin_cache[NAME] = _Columns(np.zeros(table.size, np.int64), np.zeros(table.size),
                                                       np.full(table.size, -1, np.int64))
    stale = np.flatnonzero(columns.versions != table.row_version)
    if len(stale):
        for row in stale.tolist():
            node = table.nodes[row]
            columns.idle[row] = _idle_quarantined(node)
            columns.degraded[row] = (sum(1 for card in node.cards if card.health == DEGRADED) / len(node.cards)
                                     if node.cards else 0.0)
        columns.versions[stale] = table.row_version[stale]
        columns.any_idle, columns.any_degraded = bool(columns.idle.any()), bool(columns.degraded.any())
    return columns


class CardHealthPlugin(RowPlugin):
    name = NAME
    reasons = (CARD_UNHEALTHY,)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        if task.gpu_required <= 0 and not task.is_fractional:
            return codes
        columns = _columns(table)
        if not columns.any_idle:
            return codes
        idle = columns.idle[rows]
        wanted = task.gpu_type
        for position in np.flatnonzero(idle).tolist():
            node = table.nodes[rows[position]]
            cards = [card for card in node.cards if not wanted or (card.type or node.gpu_type) == wanted]
            if task.gpu_required > 0:
                free = sum(1 for card in cards if card.is_free)
                blocked = free < task.gpu_required <= free + idle[position]
            else:
                blocked = not any(card.whole_card_tasks == 0 for card in cards)
            codes[position] = blocked
        return codes

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        # A cluster without an idle quarantined card, or a task without cards, asks nothing of this filter.
        if (task.gpu_required <= 0 and not task.is_fractional) or not _columns(table).any_idle:
            return EVERY_ROW_PASSES
        return task.gpu_required, task.is_fractional, task.gpu_type

    def score_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        # The penalty is the node's, whatever the task.
        return ()

    def score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        columns = _columns(table)
        if not columns.any_degraded:
            return np.zeros(len(rows))
        degraded = columns.degraded[rows]
        return np.where(degraded > 0, -100.0 * degraded, 0.0)


def factory(setting: PluginSetting) -> CardHealthPlugin:
    return CardHealthPlugin()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({FILTER, SCORE}),
                  description="Keeps work off quarantined (failed) cards and prefers nodes without degraded cards.")
