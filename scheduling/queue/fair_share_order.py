"""The `fair-share` queue order (design §17.1, §17.4): within a priority, the tenant with the lowest decayed usage
÷ nominal first (`scheduling.fair_share.decayed`), then creation. The cycle reorders the window it took from the
queue with each tenant's share read once per cycle: no query per task."""

import math
from collections.abc import Mapping

from scheduling.fair_share.decayed import DecayedShare, decayed_shares
from scheduling.queue.entries import TASK, QueueEntry

_NO_SHARE = (math.inf, math.inf)


def fair_share_order(entries: list[QueueEntry], shares: Mapping[int, DecayedShare]) -> list[QueueEntry]:
    def key(entry: QueueEntry):
        share = shares.get(entry.tenant_id)
        return (-entry.priority, share.order_key if share else _NO_SHARE, entry.created_at, entry.kind != TASK,
                entry.id)

    return sorted(entries, key=key)


def order_by_decayed_share(entries: list[QueueEntry]) -> list[QueueEntry]:
    return fair_share_order(entries, decayed_shares(entry.tenant_id for entry in entries))
