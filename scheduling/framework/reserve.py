"""The built-in Reserve (design §5.3): which of a node's cards a task gets when no Reserve plugin answers."""

from scheduling.framework.sharing import card_admits_tenant, has_compute_for
from scheduling.framework.snapshot import CardInfo, NodeInfo, SchedulerConfig, TaskInfo, TenancyView


def whole_card_candidates(task: TaskInfo, node: NodeInfo, config: SchedulerConfig) -> list[CardInfo]:
    """The cards resource-filter would accept for a whole-card task: free, under the memory threshold, with the
    task's card memory free after reserve."""
    return [card for card in node.cards
            if card.is_free and not config.card_overloaded(card)
            and (not task.gpu_memory_mb or config.card_free_mb(card) >= task.gpu_memory_mb)]


def default_cards(task: TaskInfo, node: NodeInfo, config: SchedulerConfig, *,
                  tenancy: TenancyView | None = None) -> list[int]:
    """The built-in Reserve (design §5.3), over the cards resource-filter would accept.

    Whole-card task: fewest active tasks, ties → lowest index. Fractional task: the one eligible card (no
    whole-card occupant, under the memory threshold, enough free memory after reserve and compute left, every
    occupant may share with the tenant) with the most free memory, ties → lowest index — stacking shards on the
    emptiest card keeps each shard's headroom largest.
    """
    if task.gpu_required > 0:
        candidates = whole_card_candidates(task, node, config)
        if len(candidates) < task.gpu_required:
            return []
        ordered = sorted(candidates, key=lambda card: (card.active_tasks, card.index))
        return sorted(card.index for card in ordered[: task.gpu_required])
    if task.is_fractional:
        tenancy = tenancy if tenancy is not None else TenancyView()
        eligible = [card for card in node.cards
                    if card.whole_card_tasks == 0 and not config.card_overloaded(card)
                    and config.card_free_mb(card) >= task.gpu_memory_mb and has_compute_for(task, card)
                    and card_admits_tenant(card, task.tenant_id, tenancy)]
        if not eligible:
            return []
        return [min(eligible, key=lambda card: (-config.card_free_mb(card), card.index)).index]
    return []
