"""rdma: node labels `rdma: true|false` and optional `rdma-speed: <Gbps>` (design §6).

Score: no label 50; `true` 70 + speed/10 capped at +30; `false` 40 (computed once per node in `NodeTable`).
Filter: task label `rdma: required` removes only nodes labelled `false`; unlabelled nodes pass.
"""

import numpy as np

from scheduling.framework.equivalence import EVERY_ROW_PASSES
from scheduling.framework.interfaces import CycleState, RowPlugin, label_is
from scheduling.framework.registry import FILTER, SCORE, PluginSetting, PluginSpec
from scheduling.framework.settings_schema import no_settings
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NodeTable

NAME = "rdma"
RDMA_REQUIRED = "RDMA required"


class Rdma(RowPlugin):
    name = NAME
    follows_usage = False
    reasons = (RDMA_REQUIRED,)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        if not label_is(task.labels, "rdma", "required"):
            return np.zeros(len(rows), np.int8)
        return table.rdma_false[rows].astype(np.int8)

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return () if label_is(task.labels, "rdma", "required") else EVERY_ROW_PASSES

    def score_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return ()

    def score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return table.rdma_score[rows]


def factory(setting: PluginSetting) -> Rdma:
    return Rdma()


SPEC = PluginSpec(NAME, factory, default=PluginSetting(NAME, True, 1), kinds=frozenset({FILTER, SCORE}),
                  settings_schema=no_settings(),
                  description="Prefers RDMA-capable nodes and faster links; rdma: required drops nodes labelled false.")
