"""tenant (always on, the framework's chain: design §4 step 1): a node dedicated to a tenant takes only its tasks.
The reason is counted, never named with the node, to other tenants (`scheduling.diagnostics.visibility`)."""

import numpy as np

from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import FILTER, PluginSetting, PluginSpec
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NodeTable

NAME = "tenant"
DEDICATED_OTHER_TENANT = "dedicated to another tenant"


class TenantFilter(RowPlugin):
    name = NAME
    follows_usage = False
    reasons = (DEDICATED_OTHER_TENANT,)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        dedicated = table.dedicated[rows]
        return ((dedicated >= 0) & (dedicated != task.tenant_id)).astype(np.int8)

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return (task.tenant_id,)


def factory(setting: PluginSetting) -> TenantFilter:
    return TenantFilter()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({FILTER}),
                  description="Keeps nodes not dedicated to another tenant.")
