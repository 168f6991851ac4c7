"""single-tenant-runtime (always on, the framework's chain; design §16.5): a node whose containers see every card
(Hygon, MetaX, Biren) takes a task with cards only when no other tenant's tasks hold its cards
(`scheduling.framework.single_tenant`). Unresolvable: preempting frees cards, not the node of its tenant. Counted,
never named with the node, to other tenants (`scheduling.diagnostics.visibility`)."""

import numpy as np

from scheduling.framework.equivalence import EVERY_ROW_PASSES
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import FILTER, PluginSetting, PluginSpec
from scheduling.framework.single_tenant import NO_HOLDER, takes_cards
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NodeTable

NAME = "single-tenant-runtime"
SINGLE_TENANT_RUNTIME = "SingleTenantRuntime"


class SingleTenantRuntimeFilter(RowPlugin):
    name = NAME
    reasons = (SINGLE_TENANT_RUNTIME,)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        if not takes_cards(task):
            return np.zeros(len(rows), np.int8)
        holder = table.card_holder[rows]
        return ((holder != NO_HOLDER) & (holder != task.tenant_id)).astype(np.int8)

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return (task.tenant_id,) if takes_cards(task) else EVERY_ROW_PASSES


def factory(setting: PluginSetting) -> SingleTenantRuntimeFilter:
    return SingleTenantRuntimeFilter()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({FILTER}),
                  description="Keeps another tenant's card-holding tasks off a node whose containers see every card.")
