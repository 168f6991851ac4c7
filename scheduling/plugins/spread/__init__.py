"""spread: prefer the least used node (design §6 node usage). Mutually exclusive with binpack and fgd."""

import numpy as np

from scheduling.framework.cards import card_class, card_groups
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import SCORE, PluginSetting, PluginSpec
from scheduling.framework.settings_schema import no_settings
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NodeTable

NAME = "spread"


def mean_usage(task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
    """mean(u_cpu, u_mem, u_gpu) with u_cpu = CPU % / 100, u_mem = used MB / (GB × 1024) and
    u_gpu = (gpu_used + gpu_required) / gpu_total; u_gpu is left out on a node without cards (and u_mem on a node
    that has not reported its memory size)."""
    has_cards = table.has_cards[rows]
    gpu = np.where(has_cards, (table.gpu_used[rows] + task.gpu_required) / table.card_divisor[rows], 0.0)
    if not table.all_uniform:
        for position in np.flatnonzero(has_cards & ~table.uniform_cards[rows]):
            gpu[position] = _group_usage(task, table.nodes[rows[position]], gpu[position])
    return (table.known_usage[rows] + gpu) / table.usage_terms[rows]


def usage_key(task: TaskInfo, table: NodeTable) -> tuple:
    """What `mean_usage` reads of a task (its equivalence class, `scheduling.framework.equivalence`): the card
    class matters only on a node with several card groups."""
    return task.gpu_required, *(() if table.all_uniform else card_class(task))


def _group_usage(task: TaskInfo, node, fallback: float) -> float:
    """u_gpu on a node with cards of several types or models: of the card group the task would take from (the
    smallest that holds it, as Reserve chooses; design §15.3), not of cards it cannot use."""
    fitting = [(len(cards), sum(1 for card in cards if not card.is_free)) for _, cards in card_groups(task, node)
               if sum(1 for card in cards if card.is_free) >= task.gpu_required]
    if not fitting:
        return fallback
    size, held = min(fitting)
    return (held + task.gpu_required) / size


class Spread(RowPlugin):
    name = NAME

    def score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return 100 * (1 - mean_usage(task, table, rows))

    def score_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return usage_key(task, table)


def factory(setting: PluginSetting) -> Spread:
    return Spread()


SPEC = PluginSpec(NAME, factory, exclusive_with=("binpack", "fgd"), default=PluginSetting(NAME, True, 1),
                  kinds=frozenset({SCORE}), settings_schema=no_settings(),
                  description="Prefers the least used nodes, spreading load across the cluster.")
