"""gpu-filter (always on): GPU type and model (design §6).

A task's `gpu_type` keeps nodes whose GPU type label or any card type equals it (all stored lower case). The task label
`gpu-model: A100|H100` keeps nodes holding at least max(1, gpu_required) cards of ONE model matching it, of the
task's type (`scheduling.framework.gpu_models`: `A100` matches `NVIDIA A100-SXM4-80GB`, design §15.2; the card groups of
`scheduling.framework.cards`, which card choice and bind use too). A node that has not reported GPUs yet passes
both: bind re-checks against live data.
"""

import numpy as np

from scheduling.framework.cards import card_class, card_groups, model_expression
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import FILTER, PluginSetting, PluginSpec
from scheduling.framework.settings_schema import no_settings
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NodeTable

NAME = "gpu-filter"
GPU_TYPE_MISMATCH = "GPU type mismatch"
GPU_MODEL_MISMATCH = "GPU model mismatch"


class GpuFilter(RowPlugin):
    name = NAME
    follows_usage = False
    reasons = (GPU_TYPE_MISMATCH, GPU_MODEL_MISMATCH)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        reported = table.has_gpu_info[rows]
        wanted = task.gpu_type
        if wanted:
            bit = table.gpu_types.get(wanted)
            if bit is None:
                matches = np.zeros(len(rows), bool)
            elif bit < 64:
                matches = (table.type_bits[rows] & np.uint64(1 << bit)) != 0
            else:
                matches = np.array([wanted in table.nodes[row].gpu_types for row in rows], bool)
            codes[reported & ~matches] = 1
        if model_expression(task):
            needed = max(1, task.gpu_required)
            for position in np.flatnonzero((codes == 0) & reported):
                if not any(len(cards) >= needed for _, cards in card_groups(task, table.nodes[rows[position]])):
                    codes[position] = 2
        return codes

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return *card_class(task), max(1, task.gpu_required) if model_expression(task) else 0


def factory(setting: PluginSetting) -> GpuFilter:
    return GpuFilter()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({FILTER}), settings_schema=no_settings(),
                  description="Keeps nodes whose GPU type (and, with a gpu-model label, card model) matches the task.")
