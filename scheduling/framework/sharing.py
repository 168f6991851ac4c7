"""The cross-tenant sharing boundary (design §8): who may hold part of one physical card at the same time, and how
much of its compute a shard takes."""

import logging
import math

from scheduling.framework.snapshot import CardInfo, TaskInfo, TenancyView

logger = logging.getLogger(__name__)


def may_share(tenant_a: int, tenant_b: int, tenancy: TenancyView) -> bool:
    """Same tenant, or both in one common share group. Fails closed: missing data or any error means no."""
    try:
        if tenant_a is None or tenant_b is None:
            return False
        if tenant_a == tenant_b:
            return True
        groups_a = tenancy.groups_of.get(tenant_a)
        groups_b = tenancy.groups_of.get(tenant_b)
        if not groups_a or not groups_b:
            return False
        return not frozenset(groups_a).isdisjoint(groups_b)
    except Exception:
        logger.exception("share check between tenants %s and %s failed; refusing to share", tenant_a, tenant_b)
        return False


def card_admits_tenant(card: CardInfo, tenant_id: int, tenancy: TenancyView) -> bool:
    """The tenant may join `card` only if it may share with EVERY current occupant (sharing is not transitive)."""
    try:
        return all(may_share(tenant_id, occupant, tenancy) for occupant in card.occupant_tenants)
    except Exception:
        logger.exception("occupant check of card %s failed; refusing to share", getattr(card, "index", "?"))
        return False


def compute_percent_for(*, gpu_memory_mb: int, gpu_compute_percent: int | None, card_memory_mb: int) -> int:
    """A shard's compute on its card: the task's own figure, else a share of the card's compute proportional to its
    share of the memory."""
    if gpu_compute_percent:
        return gpu_compute_percent
    if card_memory_mb <= 0:
        return 100
    return min(100, max(1, math.ceil(100 * gpu_memory_mb / card_memory_mb)))


def has_compute_for(task: TaskInfo, card: CardInfo) -> bool:
    """Whether the shards on `card` leave the compute fractional `task` would take there (never overcommitted,
    design §8: bind refuses it, so the filters and Reserve do too)."""
    needed = compute_percent_for(gpu_memory_mb=task.gpu_memory_mb, gpu_compute_percent=task.gpu_compute_percent,
                                 card_memory_mb=card.memory_total_mb)
    return card.shard_compute_percent + needed <= 100
