"""faulty: a misbehaving custom plugin for the fault-isolation tests (issue 13, item 2).

Filter raises for a task labelled `explode: "true"`; Score answers NaN on nodes labelled `nan-score: "true"` and
+infinity on nodes labelled `inf-score: "true"`, and 1 elsewhere.
"""

from scheduling.framework.interfaces import CycleState
from scheduling.framework.registry import FILTER, SCORE, PluginSetting
from scheduling.framework.snapshot import NodeInfo, TaskInfo
from scheduling.framework.status import Status

NAME = "faulty"


class Faulty:
    name = NAME

    def filter(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> Status:
        if task.labels.get("explode") == "true":
            raise RuntimeError(f"faulty cannot judge task {task.id}")
        return Status(plugin=NAME)

    def score(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> float:
        if node.labels.get("nan-score") == "true":
            return float("nan")
        if node.labels.get("inf-score") == "true":
            return float("inf")
        return 1.0


class FaultyFactory:
    name = NAME
    kinds = frozenset({FILTER, SCORE})
    default = PluginSetting(NAME, enabled=True, weight=100, extra={})

    def __call__(self, setting: PluginSetting) -> Faulty:
        return Faulty()


factory = FaultyFactory()
