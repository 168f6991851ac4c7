"""spread: prefer the least used node (SPEC §6 node usage). Mutually exclusive with binpack and fgd."""

import numpy as np

from scheduling.framework.cards import card_groups
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import SCORE, PluginSetting, PluginSpec
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NodeTable

NAME = "spread"


def mean_usage(task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
    """mean(u_cpu, u_mem, u_gpu) with u_cpu = CPU % / 100, u_mem = used MB / (GB × 1024) and
    u_gpu = (gpu_used + gpu_required) / gpu_total; u_gpu is left out on a node without cards (and u_mem on a node
    that has not reported its memory size)."""
    total = table.cpu_usage[rows].copy()
    terms = np.ones(len(rows))
    memory = table.memory_usage[rows]
    has_memory = ~np.isnan(memory)
    total[has_memory] += memory[has_memory]
    terms += has_memory
    gpu_total = table.gpu_total[rows]
    has_cards = gpu_total > 0
    gpu_usage = np.zeros(len(rows))
    gpu_usage[has_cards] = (table.gpu_used[rows][has_cards] + task.gpu_required) / gpu_total[has_cards]
    for position in np.flatnonzero(has_cards & ~table.uniform_cards[rows]):
        gpu_usage[position] = _group_usage(task, table.nodes[rows[position]], gpu_usage[position])
    total += gpu_usage
    terms += has_cards
    return total / terms


def _group_usage(task: TaskInfo, node, fallback: float) -> float:
    """u_gpu on a node with cards of several types or models: of the card group the task would take from (the
    smallest that holds it, as Reserve chooses; SPEC §15.3), not of cards it cannot use."""
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


def factory(setting: PluginSetting) -> Spread:
    return Spread()


SPEC = PluginSpec(NAME, factory, exclusive_with=("binpack", "fgd"), default=PluginSetting(NAME, True, 1),
                  kinds=frozenset({SCORE}),
                  description="Prefers the least used nodes, spreading load across the cluster.")
