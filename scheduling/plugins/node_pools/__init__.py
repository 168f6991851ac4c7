"""node-pools (always on): taints, tolerations and node selectors (design §16.3, seed 004's pools; the rules are
`nodes.taints`').

Filter: a node with a `NoSchedule` taint the task does not tolerate is refused (`TaintNotTolerated`), a node whose
labels lack a pair of the task's `node_selector` too (`NodeSelectorMismatch`). Score: 100, halved for each
`PreferNoSchedule` taint the task does not tolerate. Both depend only on the task's tolerations and selector and
on what the node is, so tasks with equal ones share the result (the equivalence cache); a task asking nothing on
a cluster without taints costs one pass over the nodes per snapshot.
"""

import numpy as np

from nodes.taints import NO_SCHEDULE, PREFER_NO_SCHEDULE, frozen, selector_matches, untolerated
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import FILTER, SCORE, PluginSetting, PluginSpec
from scheduling.framework.settings_schema import no_settings
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NodeTable

NAME = "node-pools"
TAINT_NOT_TOLERATED = "TaintNotTolerated"
NODE_SELECTOR_MISMATCH = "NodeSelectorMismatch"
FULL_SCORE = 100.0


class NodePools(RowPlugin):
    name = NAME
    follows_usage = False
    reasons = (TAINT_NOT_TOLERATED, NODE_SELECTOR_MISMATCH)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        nodes, tolerations, selector = table.nodes, task.tolerations, task.node_selector
        for position, row in enumerate(rows.tolist()):
            node = nodes[row]
            if node.taints and untolerated(node.taints, tolerations, NO_SCHEDULE):
                codes[position] = 1
            elif selector and not selector_matches(selector, node.labels):
                codes[position] = 2
        return codes

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return frozen(task.tolerations), tuple(sorted(task.node_selector.items()))

    def score_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        nodes, tolerations = table.nodes, task.tolerations
        return np.array([FULL_SCORE / 2 ** untolerated(nodes[row].taints, tolerations, PREFER_NO_SCHEDULE)
                         if nodes[row].taints else FULL_SCORE for row in rows.tolist()], float)

    def score_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return frozen(task.tolerations)


def factory(setting: PluginSetting) -> NodePools:
    return NodePools()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({FILTER, SCORE}), settings_schema=no_settings(),
                  description="Node pools: refuses nodes with NoSchedule taints the task does not tolerate and nodes "
                              "its node selector does not match; PreferNoSchedule taints lower the score.")
