"""tenant-active (always on, the framework's chain; design §15.6): a pending task of an inactive tenant is held,
not scheduled; its running tasks go on."""

from scheduling.framework import reasons
from scheduling.framework.interfaces import CycleState
from scheduling.framework.registry import PRE_FILTER, PluginSetting, PluginSpec
from scheduling.framework.snapshot import ClusterSnapshot, TaskInfo
from scheduling.framework.status import Code, Status

NAME = "tenant-active"
TENANT_INACTIVE_MESSAGE = "the tenant is inactive: its pending tasks are held until it is active again"


class TenantActivePreFilter:
    name = NAME

    def pre_filter(self, state: CycleState, task: TaskInfo, snapshot: ClusterSnapshot) -> Status:
        if task.tenant_id not in snapshot.inactive_tenant_ids:
            return Status(plugin=self.name)
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (TENANT_INACTIVE_MESSAGE,), self.name,
                      attempt_code=reasons.TENANT_INACTIVE)


def factory(setting: PluginSetting) -> TenantActivePreFilter:
    return TenantActivePreFilter()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({PRE_FILTER}),
                  description="Holds the pending tasks of an inactive tenant.")
