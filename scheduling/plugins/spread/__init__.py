"""spread: prefer the least used node (SPEC §6 node usage). Mutually exclusive with binpack."""

import numpy as np

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
    total[has_cards] += (table.gpu_used[rows][has_cards] + task.gpu_required) / gpu_total[has_cards]
    terms += has_cards
    return total / terms


class Spread(RowPlugin):
    name = NAME

    def score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return 100 * (1 - mean_usage(task, table, rows))


def factory(setting: PluginSetting) -> Spread:
    return Spread()


SPEC = PluginSpec(NAME, factory, exclusive_with="binpack", default=PluginSetting(NAME, True, 1),
                  kinds=frozenset({SCORE}),
                  description="Prefers the least used nodes, spreading load across the cluster.")
