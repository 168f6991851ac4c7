"""gatekeeper: an example custom Bind plugin (docs/custom-plugins.md).

Bind runs once the framework has chosen a node and cards. This plugin refuses binds to nodes labelled
`maintenance: true` (the task stays pending and goes back to the framework for another node), binds tasks labelled
`binder: external` itself (here it only records them; a real one would hand them to another system), and skips
everything else, which the default binder (the bind pipeline) then binds.
"""

from scheduling.framework import reasons
from scheduling.framework.interfaces import CycleState
from scheduling.framework.registry import BIND, PluginSetting
from scheduling.framework.snapshot import NodeInfo, TaskInfo
from scheduling.framework.status import SKIP, Status

NAME = "gatekeeper"
UNDER_MAINTENANCE = "node under maintenance"
# (task id, node name, cards) of every task this plugin bound itself.
BOUND_EXTERNALLY: list[tuple[int, str, list[int]]] = []


class Gatekeeper:
    name = NAME

    def bind(self, state: CycleState, task: TaskInfo, node: NodeInfo, cards: list[int]) -> Status:
        if node.labels.get("maintenance") == "true":
            return Status.unschedulable(UNDER_MAINTENANCE, plugin=NAME, attempt_code=reasons.NO_SCHEDULABLE_NODES)
        if task.labels.get("binder") == "external":
            BOUND_EXTERNALLY.append((task.id, node.name, cards))
            return Status(plugin=NAME)
        return SKIP


class GatekeeperFactory:
    name = NAME
    kinds = frozenset({BIND})
    description = "Refuses binds to nodes under maintenance; binds tasks labelled binder: external itself."

    def __call__(self, setting: PluginSetting) -> Gatekeeper:
        return Gatekeeper()


factory = GatekeeperFactory()
