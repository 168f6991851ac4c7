"""resource-filter (always on): the per-card GPU admission check (design §6, §8). CPU and memory are bind's job.

Whole-card task: at least `gpu_required` free cards (no active occupant) whose memory utilisation is under the
threshold (95 %) and, when `gpu_memory_mb` is set, each with that much free memory after reserve.
Fractional task: one card without a whole-card occupant, under the threshold, with free memory after reserve
(`SchedulerConfig.card_free_mb`: total − reserve − max(reported used, booked shards)) ≥ `gpu_memory_mb` and the
compute the shard would take left (`NodeTable.shard_room`, bind's rule), whose occupants ALL may share with the
task's tenant. When such cards exist but the tenant rule rejects each of them, the
reason is NO_TENANT_ELIGIBLE_CARD, which the framework turns into NoTenantEligibleGPU.
Only cards of one of the task's card groups count (its type and gpu-model, never a mix; design §15.3): on a node whose
cards are all of one type and model that is every card (gpu-filter has checked them), otherwise each group is
judged on its own and the node passes when one group can hold the task.
"""

import numpy as np

from scheduling.framework import reasons as r
from scheduling.framework.cards import card_class, card_groups
from scheduling.framework.interfaces import CycleState, RowPlugin
from scheduling.framework.registry import FILTER, PluginSetting, PluginSpec
from scheduling.framework.settings_schema import no_settings
from scheduling.framework.sharing import card_admits_tenant, may_share
from scheduling.framework.snapshot import TaskInfo
from scheduling.framework.table import NodeTable
# The same phrases as the chain's coarse pre-filter: the summary counts a node short of cards once, whoever saw it.
from scheduling.plugins.resource_prefilter import INSUFFICIENT_GPU, INSUFFICIENT_GPU_MEMORY

NAME = "resource-filter"
CARDS_OVERLOADED = "GPU memory above threshold"
INSUFFICIENT_GPU_COMPUTE = "Insufficient GPU compute"
NO_TENANT_ELIGIBLE_CARD = "no card shareable with the tenant"
# `_sole_occupants` for a card nobody occupies, and for one several tenants share (checked card by card).
NOBODY, SEVERAL = -1, -2


class ResourceFilter(RowPlugin):
    name = NAME
    reasons = (INSUFFICIENT_GPU, INSUFFICIENT_GPU_MEMORY, CARDS_OVERLOADED, NO_TENANT_ELIGIBLE_CARD,
               INSUFFICIENT_GPU_COMPUTE)
    resolvable = frozenset({INSUFFICIENT_GPU, INSUFFICIENT_GPU_MEMORY, CARDS_OVERLOADED, INSUFFICIENT_GPU_COMPUTE})
    # Cards exist but the tenant may share none of them: the attempt says so (design §12).
    attempt_codes = {NO_TENANT_ELIGIBLE_CARD: r.NO_TENANT_ELIGIBLE_GPU}

    def filter_rows(self, state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        codes = np.zeros(len(rows), np.int8)
        if task.gpu_required > 0:
            self._whole_cards(task, codes, table.card_usable[rows], table.card_free_mb[rows],
                              table.cards_all_overloaded[rows], usable_count=table.usable_cards[rows])
        elif task.is_fractional:
            self._shard(state, task, table, rows, codes, table.card_shardable[rows], table.card_open[rows],
                        table.cards_all_overloaded[rows])
        else:
            return codes
        for position in np.flatnonzero(~table.uniform_cards[rows]):
            codes[position] = self._grouped(state, task, table, rows[position])
        return codes

    def filter_key(self, task: TaskInfo, table: NodeTable) -> tuple:
        # The tenant and compute matter only to a shard (who it may share a card with, what it takes), the card
        # class only on a node with several card groups (elsewhere gpu-filter has judged the type and model).
        shard = (task.tenant_id, task.gpu_compute_percent) if task.is_fractional else (None, None)
        return (task.gpu_required, task.gpu_memory_mb, *shard, *(() if table.all_uniform else card_class(task)))

    def _grouped(self, state: CycleState, task: TaskInfo, table: NodeTable, row: int) -> int:
        """A node with cards of several types or models: the best code over its card groups (0 = one fits)."""
        node = table.nodes[row]
        column_of = {id(card): column for column, card in enumerate(node.cards[: table.width])}
        single = np.array([row])
        best = 1
        for _, cards in card_groups(task, node):
            eligible = np.zeros((1, table.width), bool)
            eligible[0, [column_of[id(card)] for card in cards if id(card) in column_of]] = True
            overloaded = eligible.any(axis=1) & ~(eligible & table.card_ok[single]).any(axis=1)
            code = np.zeros(1, np.int8)
            if task.gpu_required > 0:
                self._whole_cards(task, code, table.card_usable[single] & eligible, table.card_free_mb[single],
                                  overloaded)
            else:
                self._shard(state, task, table, single, code, table.card_shardable[single] & eligible,
                            table.card_open[single] & eligible, overloaded)
            best = min(best, int(code[0]))
            if best == 0:
                break
        return best

    @staticmethod
    def _whole_cards(task: TaskInfo, codes: np.ndarray, usable: np.ndarray, free_mb: np.ndarray,
                     overloaded: np.ndarray, *, usable_count: np.ndarray | None = None) -> None:
        """`usable`: the rows' cards a whole-card task may take (the table's `card_usable`, within one card group
        on a mixed node); `usable_count` its row sums when the table has them."""
        if usable_count is None:
            usable_count = usable.sum(axis=1)
        enough = (usable & (free_mb >= task.gpu_memory_mb)).sum(axis=1) if task.gpu_memory_mb else usable_count
        short = enough < task.gpu_required
        if not short.any():
            return
        codes[short] = 1
        codes[short & (usable_count >= task.gpu_required)] = 2
        codes[short & overloaded] = 3

    @staticmethod
    def _shard(state: CycleState, task: TaskInfo, table: NodeTable, rows: np.ndarray, codes: np.ndarray,
               shardable: np.ndarray, open_cards: np.ndarray, overloaded: np.ndarray) -> None:
        memory, compute = table.shard_fit(task, rows)
        roomy = memory & compute
        candidate = shardable & roomy
        has_candidate = candidate.any(axis=1)
        missing = ~has_candidate
        if missing.any():
            codes[missing] = 2
            # Memory enough on some card, compute on none of those.
            codes[missing & (shardable & memory).any(axis=1)] = 5
            codes[missing & overloaded] = 3
        open_card = (open_cards & roomy).any(axis=1)
        # Only nodes whose every candidate card already has occupants need the per-occupant tenant check: by array
        # for cards of one occupant tenant (the usual case), card by card for cards several tenants share.
        positions = np.flatnonzero(has_candidate & ~open_card)
        if not len(positions):
            return
        occupants = _sole_occupants(table, rows[positions])
        candidates = candidate[positions]
        tenants = np.unique(occupants[candidates & (occupants >= 0)]).tolist()
        sharing = [tenant for tenant in tenants if may_share(task.tenant_id, tenant, state.tenancy)]
        # A card occupied by no known tenant admits anyone (as `card_admits_tenant` has it).
        joinable = occupants == NOBODY
        for tenant in sharing:
            joinable |= occupants == tenant
        admitted = (candidates & joinable).any(axis=1)
        for index in np.flatnonzero(~admitted & (candidates & (occupants == SEVERAL)).any(axis=1)):
            cards = table.nodes[rows[positions[index]]].cards
            admitted[index] = any(card_admits_tenant(cards[column], task.tenant_id, state.tenancy)
                                  for column in np.flatnonzero(candidates[index] & (occupants[index] == SEVERAL)))
        codes[positions[~admitted]] = 4


def _sole_occupants(table: NodeTable, rows: np.ndarray) -> np.ndarray:
    """Per row and card position: the one tenant occupying the card, NOBODY, or SEVERAL. Kept in the table per row
    version, so only the rows changed since are read again."""
    cache = table.plugin_cache.get(NAME)
    if cache is None:
        cache = table.plugin_cache[NAME] = (np.full((table.size, table.width), NOBODY, np.int64),
                                            np.full(table.size, -1, np.int64))
    occupants, versions = cache
    stale = rows[versions[rows] != table.row_version[rows]]
    for row in stale.tolist():
        occupants[row] = NOBODY
        for column, card in enumerate(table.nodes[row].cards[: table.width]):
            tenants = card.occupant_tenants
            if len(tenants) == 1:
                (tenant,) = tenants
                occupants[row, column] = tenant if isinstance(tenant, int) and tenant >= 0 else SEVERAL
            elif tenants:
                occupants[row, column] = SEVERAL
    versions[stale] = table.row_version[stale]
    return occupants[rows]


def factory(setting: PluginSetting) -> ResourceFilter:
    return ResourceFilter()


SPEC = PluginSpec(NAME, factory, always_on=True, kinds=frozenset({FILTER}), settings_schema=no_settings(),
                  description="Keeps nodes with enough free cards, or card memory for a fractional task.")
