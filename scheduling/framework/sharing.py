"""The cross-tenant sharing boundary (design §8): who may hold part of one physical card at the same time."""

import logging

from scheduling.framework.snapshot import CardInfo, TenancyView

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
