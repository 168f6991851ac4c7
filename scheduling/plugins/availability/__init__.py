"""availability (always on, the framework's chain: design §4 step 1): a node offline or cordoned takes nothing."""

import numpy as np

from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import FILTER, PluginSetting, PluginSpec
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NodeTable

NAME = "availability"
NODE_OFFLINE = "node offline"
NODE_UNSCHEDULABLE = "node cordoned"


class AvailabilityFilter(RowPlugin):
    name = NAME
    follows_usage = False
    reasons = (NODE_OFFLINE, NODE_UNSCHEDULABLE)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return np.where(~table.available[rows], 1, np.where(~table.schedulable[rows], 2, 0))

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return ()


def factory(setting: PluginSetting) -> AvailabilityFilter:
    return AvailabilityFilter()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({FILTER}),
                  description="Keeps nodes that are online and not cordoned.")
