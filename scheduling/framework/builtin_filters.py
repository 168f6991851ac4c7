"""The built-in filter chain every task passes before the plugin filters (SPEC §4 step 1), in order:
availability → tenant → resource pre-filter → affinity and cross-tenant constraints.

The resource pre-filter is deliberately coarse (node ledger and empty-card capacity); the per-card truth is the
resource-filter plugin's. The cross-tenant card boundary needs card occupancy, so it lives there too (§8).
"""

import numpy as np

from scheduling.framework import reasons
from scheduling.framework.interfaces import CycleState, RowPlugin, label_is
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NO_CODE, NodeTable

INFERENCE = "inference"
PLACEMENT_FIELDS = ("region", "zone", "rack")


class AvailabilityFilter(RowPlugin):
    name = "availability"
    reasons = (reasons.NODE_OFFLINE, reasons.NODE_UNSCHEDULABLE)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return np.where(~table.available[rows], 1, np.where(~table.schedulable[rows], 2, 0))


class TenantFilter(RowPlugin):
    name = "tenant"
    reasons = (reasons.DEDICATED_OTHER_TENANT,)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        dedicated = table.dedicated[rows]
        return ((dedicated >= 0) & (dedicated != task.tenant_id)).astype(np.int8)


class ResourcePreFilter(RowPlugin):
    name = "resource-prefilter"
    reasons = (reasons.INSUFFICIENT_GPU, reasons.INSUFFICIENT_GPU_MEMORY, reasons.INFERENCE_LIMIT)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        if task.gpu_required > 0:
            codes[table.gpu_total[rows] - table.gpu_used[rows] < task.gpu_required] = 1
        elif task.is_fractional:
            fits = (table.card_exists[rows] & (table.card_capacity_mb[rows] >= task.gpu_memory_mb)).any(axis=1)
            codes[~fits] = 2
        if task.type == INFERENCE:
            codes[(codes == 0) & (table.inference_tasks[rows] >= state.config.inference_max_per_node)] = 3
        return codes


class AffinityFilter(RowPlugin):
    """`topology: required` turns the task's region/zone/rack labels into hard constraints on nodes that have
    the field set; a node with the field empty still passes (SPEC §3, §6 topology)."""

    name = "affinity"
    reasons = (reasons.REGION_MISMATCH, reasons.ZONE_MISMATCH, reasons.RACK_MISMATCH)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        if not label_is(task.labels, "topology", "required"):
            return codes
        columns = ((table.region, table.regions), (table.zone, table.zones), (table.rack, table.racks))
        for code, (field, (column, vocabulary)) in enumerate(zip(PLACEMENT_FIELDS, columns), start=1):
            wanted = str(task.labels.get(field, "")).strip()
            if not wanted:
                continue
            values = column[rows]
            codes[(codes == 0) & (values != NO_CODE) & (values != vocabulary.lookup(wanted))] = code
        return codes


BUILTIN_CHAIN = (AvailabilityFilter(), TenantFilter(), ResourcePreFilter(), AffinityFilter())
