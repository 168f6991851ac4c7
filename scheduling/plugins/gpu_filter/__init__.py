"""gpu-filter (always on): GPU type and model (SPEC §6).

A task's `gpu_type` keeps nodes whose GPU type label or any card type equals it, case-insensitively. The task label
`gpu-model: A100|H100` keeps nodes holding at least max(1, gpu_required) cards of ONE listed model (case-insensitive).
A node that has not reported GPUs yet passes both: bind re-checks against live data.
"""

from collections import Counter

import numpy as np

from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import FILTER, PluginSetting, PluginSpec
from scheduling.framework.snapshot import NodeInfo, TaskInfo
from scheduling.framework.table import NodeTable

NAME = "gpu-filter"
MODEL_LABEL = "gpu-model"
GPU_TYPE_MISMATCH = "GPU type mismatch"
GPU_MODEL_MISMATCH = "GPU model mismatch"


def _model_counts(node: NodeInfo) -> Counter:
    counts = node.cache.get(MODEL_LABEL)
    if counts is None:
        counts = node.cache[MODEL_LABEL] = Counter(card.model.strip().lower() for card in node.cards if card.model)
    return counts


class GpuFilter(RowPlugin):
    name = NAME
    reasons = (GPU_TYPE_MISMATCH, GPU_MODEL_MISMATCH)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        reported = table.has_gpu_info[rows]
        wanted = task.gpu_type.strip().lower()
        if wanted:
            bit = table.gpu_types.get(wanted)
            if bit is None:
                matches = np.zeros(len(rows), bool)
            elif bit < 64:
                matches = (table.type_bits[rows] & np.uint64(1 << bit)) != 0
            else:
                matches = np.array([wanted in table.nodes[row].gpu_types for row in rows], bool)
            codes[reported & ~matches] = 1
        models = {model.strip().lower() for model in str(task.labels.get(MODEL_LABEL, "")).split("|") if model.strip()}
        if models:
            needed = max(1, task.gpu_required)
            for position in np.flatnonzero((codes == 0) & reported):
                counts = _model_counts(table.nodes[rows[position]])
                if not any(counts.get(model, 0) >= needed for model in models):
                    codes[position] = 2
        return codes


def factory(setting: PluginSetting) -> GpuFilter:
    return GpuFilter()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({FILTER}),
                  description="Keeps nodes whose GPU type (and, with a gpu-model label, card model) matches the task.")
