"""resource-prefilter (always on, the framework's chain: design §4 step 1): room in the GPU ledger, a card big
enough, the inference limit, and the host CPU and memory the node's active tasks book (design §16.1: counted in the
snapshot so one cycle never overfills a node).

Deliberately coarse (node ledger and empty-card capacity); the per-card truth is the resource-filter plugin's.
"""

import numpy as np

from scheduling.framework import reasons
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import FILTER, PluginSetting, PluginSpec
from scheduling.framework.snapshot import HOST_EPSILON, TaskInfo
from scheduling.framework.table import NodeTable

NAME = "resource-prefilter"
INSUFFICIENT_GPU = "Insufficient GPU"
INSUFFICIENT_GPU_MEMORY = "Insufficient GPU memory"
INFERENCE_LIMIT = "inference container limit reached"
INSUFFICIENT_HOST = "Insufficient host CPU or memory"
INFERENCE = "inference"


class ResourcePreFilter(RowPlugin):
    name = NAME
    attempt_codes = {INSUFFICIENT_HOST: reasons.INSUFFICIENT_HOST_RESOURCES}
    reasons = (INSUFFICIENT_GPU, INSUFFICIENT_GPU_MEMORY, INFERENCE_LIMIT, INSUFFICIENT_HOST)
    resolvable = frozenset(reasons)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        if task.gpu_required > 0:
            codes[table.gpu_total[rows] - table.gpu_used[rows] < task.gpu_required] = 1
        elif task.is_fractional:
            codes[table.max_card_capacity_mb[rows] < task.gpu_memory_mb] = 2
        if task.type == INFERENCE:
            codes[(codes == 0) & (table.inference_tasks[rows] >= state.config.inference_max_per_node)] = 3
        if task.cpu_cores or task.memory_mb:
            short = ((table.host_cpu_free[rows] + HOST_EPSILON < task.cpu_cores)
                     | (table.host_memory_free_mb[rows] < task.memory_mb))
            codes[(codes == 0) & short] = 4
        return codes

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return (task.gpu_required, task.gpu_memory_mb if task.is_fractional else 0, task.type == INFERENCE,
                task.cpu_cores, task.memory_mb)


def factory(setting: PluginSetting) -> ResourcePreFilter:
    return ResourcePreFilter()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({FILTER}),
                  description="Keeps nodes with room in the GPU ledger, a card big enough, room under the inference "
                              "limit, and the host CPU and memory the task asks.")
