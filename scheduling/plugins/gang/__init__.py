"""gang (always on, the framework's chain; design §10): a gang binds whole or not at all, so its batch is
permitted only with a placement per member."""

from collections.abc import Sequence

from scheduling.framework import reasons
from scheduling.framework.interfaces import CycleState
from scheduling.framework.registry import PERMIT, PluginSetting, PluginSpec
from scheduling.framework.snapshot import NodeInfo, TaskInfo
from scheduling.framework.status import Status

NAME = "gang"


class GangPermit:
    name = NAME

    def permit(self, state: CycleState, placements: Sequence[tuple[TaskInfo, NodeInfo, list[int]]],
               world_size: int) -> Status:
        if len(placements) == world_size:
            return Status(plugin=self.name)
        return Status.unschedulable(f"{len(placements)} of {world_size} members placed; a gang is placed only whole",
                                    plugin=self.name, attempt_code=reasons.GANG_INCOMPLETE)


def factory(setting: PluginSetting) -> GangPermit:
    return GangPermit()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({PERMIT}),
                  description="Permits a gang's placements only when every member has one.")
