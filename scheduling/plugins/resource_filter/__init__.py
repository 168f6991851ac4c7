"""resource-filter (always on): the per-card GPU admission check (SPEC §6, §8). CPU and memory are bind's job.

Whole-card task: at least `gpu_required` free cards (no active occupant) whose memory utilisation is under the
threshold (95 %) and, when `gpu_memory_mb` is set, each with that much free memory after reserve.
Fractional task: one card without a whole-card occupant, under the threshold, with free memory after reserve
(`SchedulerConfig.card_free_mb`: total − reserve − max(reported used, booked shards)) ≥ `gpu_memory_mb`, whose
occupants ALL may share with the task's tenant. When such cards exist but the tenant rule rejects each of them, the
reason is NO_TENANT_ELIGIBLE_CARD, which the framework turns into NoTenantEligibleGPU.
"""

import numpy as np

from scheduling.framework import reasons as r
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import FILTER, PluginSetting, PluginSpec
from scheduling.framework.sharing import card_admits_tenant
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NodeTable

NAME = "resource-filter"
INSUFFICIENT_GPU = r.INSUFFICIENT_GPU
INSUFFICIENT_GPU_MEMORY = r.INSUFFICIENT_GPU_MEMORY
CARDS_OVERLOADED = "GPU memory above threshold"
NO_TENANT_ELIGIBLE_CARD = "no card shareable with the tenant"


class ResourceFilter(RowPlugin):
    name = NAME
    reasons = (INSUFFICIENT_GPU, INSUFFICIENT_GPU_MEMORY, CARDS_OVERLOADED, NO_TENANT_ELIGIBLE_CARD)
    resolvable = frozenset({INSUFFICIENT_GPU, INSUFFICIENT_GPU_MEMORY, CARDS_OVERLOADED})
    # Cards exist but the tenant may share none of them: the attempt says so (SPEC §12).
    attempt_codes = {NO_TENANT_ELIGIBLE_CARD: r.NO_TENANT_ELIGIBLE_GPU}

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        if task.gpu_required > 0:
            self._whole_cards(task, table, rows, codes)
        elif task.is_fractional:
            self._shard(state, task, table, rows, codes)
        return codes

    @staticmethod
    def _whole_cards(task: TaskInfo, table: NodeTable, rows: np.ndarray, codes: np.ndarray) -> None:
        usable = table.usable_cards[rows]
        if task.gpu_memory_mb:
            enough = (table.card_usable[rows] & (table.card_free_mb[rows] >= task.gpu_memory_mb)).sum(axis=1)
        else:
            enough = usable
        short = enough < task.gpu_required
        if not short.any():
            return
        codes[short] = 1
        codes[short & (usable >= task.gpu_required)] = 2
        codes[short & table.cards_all_overloaded[rows]] = 3

    @staticmethod
    def _shard(state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray, codes: np.ndarray) -> None:
        roomy = table.card_free_mb[rows] >= task.gpu_memory_mb
        candidate = table.card_shardable[rows] & roomy
        has_candidate = candidate.any(axis=1)
        open_card = (table.card_open[rows] & roomy).any(axis=1)
        codes[~has_candidate] = 2
        codes[~has_candidate & table.cards_all_overloaded[rows]] = 3
        # Only nodes whose every candidate card already has occupants need the per-occupant tenant check.
        for position in np.flatnonzero(has_candidate & ~open_card):
            cards = table.nodes[rows[position]].cards
            if not any(card_admits_tenant(cards[column], task.tenant_id, state.tenancy)
                       for column in np.flatnonzero(candidate[position])):
                codes[position] = 4


def factory(setting: PluginSetting) -> ResourceFilter:
    return ResourceFilter()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({FILTER}),
                  description="Keeps nodes with enough free cards, or card memory for a fractional task.")
