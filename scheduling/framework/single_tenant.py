"""Nodes whose containers see every card (design §16.5): on Hygon, MetaX and Biren the container runtime cannot hide
the other cards from a container, so such a node holds one tenant's card-holding tasks at a time. The snapshot's
table carries each node's holder (`NodeTable.card_holder`), the always-on `single-tenant-runtime` plugin reads it and
bind re-checks it on the live node. A task without cards is handed no device and may land there beside anyone."""

from scheduling.framework.snapshot import NodeInfo, TaskInfo

# `card_holder` of a node that keeps no tenant out: of another vendor, or with no card held.
NO_HOLDER = -1
# Of a node several tenants already hold (it predates the rule, or an admin placed them): it admits none of them.
SEVERAL_HOLDERS = -2


def card_holder(node: NodeInfo) -> int:
    """The tenant whose tasks hold cards of a single-tenant node, NO_HOLDER or SEVERAL_HOLDERS."""
    if not node.cards_visible_to_every_container:
        return NO_HOLDER
    tenants = {tenant for card in node.cards for tenant in card.occupant_tenants}
    if not tenants:
        return NO_HOLDER
    return next(iter(tenants)) if len(tenants) == 1 else SEVERAL_HOLDERS


def takes_cards(task: TaskInfo) -> bool:
    return task.gpu_required > 0 or task.is_fractional


def held_by_another_tenant(task: TaskInfo, holder: int) -> bool:
    return takes_cards(task) and holder not in (NO_HOLDER, task.tenant_id)
