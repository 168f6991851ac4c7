"""reservation (always on, the framework's chain; design §16.3): refuses a node whose free cards would fit the task
but are held for another task's reservation (the held cards are counted as used, so without this the task would read
`Insufficient GPU` there). Unresolvable: preempting work on that node would free cards for the reserved job, not for
this task. The reserved job itself is chosen by `scheduling.queue.reservation`."""

import numpy as np

from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import FILTER, PluginSetting, PluginSpec
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NodeTable

NAME = "reservation"
RESERVED = "Reserved"


class ReservationFilter(RowPlugin):
    name = NAME
    reasons = (RESERVED,)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        if task.gpu_required <= 0:
            return codes
        free = table.gpu_total[rows] - table.gpu_used[rows]
        # Only a node whose free cards are too few can be one whose held cards make the difference: the held
        # counts are read (node by node) for those alone.
        short = np.flatnonzero(free < task.gpu_required)
        if not len(short):
            return codes
        held = np.fromiter((table.nodes[row].reserved_cards for row in rows[short].tolist()), np.int64, len(short))
        codes[short[(held > 0) & (free[short] + held >= task.gpu_required)]] = 1
        return codes

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return (task.gpu_required,)


def factory(setting: PluginSetting) -> ReservationFilter:
    return ReservationFilter()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({FILTER}),
                  description="Refuses free cards held for another job's reservation.")
