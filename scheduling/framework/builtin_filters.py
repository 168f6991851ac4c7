"""The built-in plugins every task meets whatever the plugin set: the tenant-status (design §15.6) and quota (design §1)
PreFilters, the filter chain every task passes before the plugin filters (design §4 step 1) — availability → tenant →
resource pre-filter → affinity and cross-tenant constraints — and the gang Permit (design §10).

The resource pre-filter is deliberately coarse (node ledger and empty-card capacity); the per-card truth is the
resource-filter plugin's. The cross-tenant card boundary needs card occupancy, so it lives there too (§8).
"""

from collections.abc import Sequence

import numpy as np

from scheduling.framework import reasons
from scheduling.framework.equivalence import EVERY_ROW_PASSES
from scheduling.framework.interfaces import CycleState, RowPlugin, label_is
from scheduling.framework.single_tenant import NO_HOLDER, takes_cards
from scheduling.framework.snapshot import HOST_EPSILON, ClusterSnapshot, NodeInfo, TaskInfo
from scheduling.framework.status import Code, Status
from scheduling.framework.table import NO_CODE, NodeTable

INFERENCE = "inference"
PLACEMENT_FIELDS = ("region", "zone", "rack")


class AvailabilityFilter(RowPlugin):
    name = "availability"
    follows_usage = False
    reasons = (reasons.NODE_OFFLINE, reasons.NODE_UNSCHEDULABLE)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return np.where(~table.available[rows], 1, np.where(~table.schedulable[rows], 2, 0))

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return ()


class TenantFilter(RowPlugin):
    name = "tenant"
    follows_usage = False
    reasons = (reasons.DEDICATED_OTHER_TENANT,)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        dedicated = table.dedicated[rows]
        return ((dedicated >= 0) & (dedicated != task.tenant_id)).astype(np.int8)

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return (task.tenant_id,)


class ResourcePreFilter(RowPlugin):
    """Room in the GPU ledger, a card big enough, the inference limit, and the host CPU and memory the node's
    active tasks book (design §16.1: counted in the snapshot so one cycle never overfills a node; built in, as
    plugins stay GPU-only)."""

    name = "resource-prefilter"
    attempt_codes = {reasons.INSUFFICIENT_HOST: reasons.INSUFFICIENT_HOST_RESOURCES}
    reasons = (reasons.INSUFFICIENT_GPU, reasons.INSUFFICIENT_GPU_MEMORY, reasons.INFERENCE_LIMIT,
               reasons.INSUFFICIENT_HOST)
    resolvable = frozenset(reasons)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        if task.gpu_required > 0:
            codes[table.gpu_total[rows] - table.gpu_used[rows] < task.gpu_required] = 1
        elif task.is_fractional:
            codes[table.max_card_capacity_mb[rows] < task.gpu_memory_mb] = 2
        if task.type == INFERENCE:
            codes[(codes == 0) & (table.inference_tasks[rows] >= state.config.inference_max_per_node)] = 3
        if task.cpu_cores or task.memory_mb:
            short = ((table.host_cpu_free[rows] + HOST_EPSILON < task.cpu_cores)
                     | (table.host_memory_free_mb[rows] < task.memory_mb))
            codes[(codes == 0) & short] = 4
        return codes

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return (task.gpu_required, task.gpu_memory_mb if task.is_fractional else 0, task.type == INFERENCE,
                task.cpu_cores, task.memory_mb)


class ReservationFilter(RowPlugin):
    """design §16.3: refuses a node whose free cards would fit the task but are held for another task's reservation (the held
    cards are counted as used, so without this the task would read `Insufficient GPU` there). Unresolvable:
    preempting work on that node would free cards for the reserved job, not for this task."""

    name = "reservation"
    reasons = (reasons.RESERVED,)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        if task.gpu_required <= 0:
            return codes
        held = np.fromiter((table.nodes[row].reserved_cards for row in rows.tolist()), np.int64, len(rows))
        free = table.gpu_total[rows] - table.gpu_used[rows]
        codes[(held > 0) & (free < task.gpu_required) & (free + held >= task.gpu_required)] = 1
        return codes

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return (task.gpu_required,)


class SingleTenantRuntimeFilter(RowPlugin):
    """design §16.5: a node whose containers see every card (Hygon, MetaX, Biren) takes a task with cards only when
    no other tenant's tasks hold its cards. Unresolvable: preempting frees cards, not the node of its tenant."""

    name = "single-tenant-runtime"
    reasons = (reasons.SINGLE_TENANT_RUNTIME,)

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        if not takes_cards(task):
            return np.zeros(len(rows), np.int8)
        holder = table.card_holder[rows]
        return ((holder != NO_HOLDER) & (holder != task.tenant_id)).astype(np.int8)

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        return (task.tenant_id,) if takes_cards(task) else EVERY_ROW_PASSES


class AffinityFilter(RowPlugin):
    """`topology: required` turns the task's region/zone/rack labels into hard constraints on nodes that have
    the field set; a node with the field empty still passes (design §3, §6 topology)."""

    name = "affinity"
    follows_usage = False
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

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        if not label_is(task.labels, "topology", "required"):
            return EVERY_ROW_PASSES
        return tuple(str(task.labels.get(field, "")).strip() for field in PLACEMENT_FIELDS)


TENANT_INACTIVE_MESSAGE = "the tenant is inactive: its pending tasks are held until it is active again"


class TenantActivePreFilter:
    """A pending task of an inactive tenant is held, not scheduled; its running tasks go on (design §15.6)."""

    name = "tenant-active"

    def pre_filter(self, state: CycleState, task: TaskInfo, snapshot: ClusterSnapshot) -> Status:
        if task.tenant_id not in snapshot.inactive_tenant_ids:
            return Status(plugin=self.name)
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (TENANT_INACTIVE_MESSAGE,), self.name,
                      attempt_code=reasons.TENANT_INACTIVE)


class QuotaPreFilter:
    """A task its tenant's quotas do not admit (total cap; per-type nominal, or borrowing from the cohort: design
    §16.2) waits, whatever the nodes. Unresolvable: preempting other tenants' work frees nothing of this tenant's
    quota (design §9). A fractional task's share is estimated on the largest card of its type; bind counts the
    card it gets."""

    name = "quota"

    def pre_filter(self, state: CycleState, task: TaskInfo, snapshot: ClusterSnapshot) -> Status:
        book = snapshot.quotas
        admission = book.admit(task, gpu_type=task.gpu_type, share=book.estimated_share(task))
        if admission.refusal is None:
            return Status(plugin=self.name)
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (admission.refusal,), self.name,
                      attempt_code=reasons.QUOTA_EXCEEDED)


class GangPermit:
    """A gang binds whole or not at all (design §10): its batch is permitted only with a placement per member."""

    name = "gang"

    def permit(self, state: CycleState, placements: Sequence[tuple[TaskInfo, NodeInfo, list[int]]],
               world_size: int) -> Status:
        if len(placements) == world_size:
            return Status(plugin=self.name)
        return Status.unschedulable(f"{len(placements)} of {world_size} members placed; a gang is placed only whole",
                                    plugin=self.name, attempt_code=reasons.GANG_INCOMPLETE)


BUILTIN_PRE_FILTERS = (TenantActivePreFilter(), QuotaPreFilter())
BUILTIN_CHAIN = (AvailabilityFilter(), TenantFilter(), ReservationFilter(), ResourcePreFilter(),
                 SingleTenantRuntimeFilter(), AffinityFilter())
