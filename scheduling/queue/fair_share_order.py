"""The `fair-share` queue order (design §17.1, §17.4): within a priority, the tenant with the lowest decayed usage
÷ nominal first (`scheduling.fair_share.decayed`), then creation. The cycle reorders the window it took from the
queue with each tenant's share read once per cycle (`pending_tenant_shares`): no query per task."""

import math
from collections.abc import Mapping

from scheduling import lifecycle
from scheduling.fair_share.decayed import DecayedShare, decayed_shares
from scheduling.models import Task
from scheduling.queue.entries import TASK, QueueEntry

_NO_SHARE = (math.inf, math.inf)


def fair_share_order(entries: list[QueueEntry], shares: Mapping[int, DecayedShare]) -> list[QueueEntry]:
    def key(entry: QueueEntry):
        share = shares.get(entry.tenant_id)
        return (-entry.priority, share.order_key if share else _NO_SHARE, entry.created_at, entry.kind != TASK,
                entry.id, entry.replica or 0)

    return sorted(entries, key=key)


def pending_tenant_shares() -> dict[int, DecayedShare]:
    """The decayed share of every tenant with pending work: read once per cycle, for its window's order and for
    the queue positions it publishes."""
    return decayed_shares(Task.objects.filter(status=lifecycle.PENDING).values_list("tenant_id", flat=True)
                          .distinct().order_by())
