"""The cluster as the diagnostics show it (design §12, §15.9): free cards against the cards a k-card task could
use, and fgd's fragment of the idle capacity."""

from typing import Any

from django.core.cache import cache

from scheduling.framework.snapshot import ClusterSnapshot, SchedulerConfig
from scheduling.framework.table import AVAILABLE_STATUSES
from scheduling.models import CycleRecord
from scheduling.plugins import fgd

FRAGMENTATION_SIZES = (1, 2, 4, 8)
# Without cycles (scheduler stopped) the figures are still rebuilt this often at most.
FRAGMENTATION_CACHE_SECONDS = 10


def fragmentation(snapshot: ClusterSnapshot) -> dict[str, Any]:
    """Free cards on available nodes vs the cards a k-card task could use: Σ over nodes of ⌊free/k⌋·k."""
    available = [node for node in snapshot.nodes if node.status in AVAILABLE_STATUSES and node.schedulable]
    free_per_node = [_free_cards(node) for node in available]
    return {
        "free_cards": sum(free_per_node),
        "usable": {size: sum(free // size * size for free in free_per_node) for size in FRAGMENTATION_SIZES},
        "fgd": fgd.fragmentation_summary(available, SchedulerConfig.from_settings()),
    }


def latest_cycle_fragmentation() -> dict[str, Any]:
    """`fragmentation` of the current cluster, built once per scheduling cycle rather than on every page view of
    every tenant: a full snapshot of a 5,000-node cluster is a second of work."""
    from scheduling.cache.snapshot_builder import build_snapshot

    latest_cycle = CycleRecord.objects.order_by("-started_at", "-id").values_list("id", flat=True).first()
    return cache.get_or_set(f"heteroflow:fragmentation:{latest_cycle}", lambda: fragmentation(build_snapshot()),
                            timeout=FRAGMENTATION_CACHE_SECONDS)


def _free_cards(node) -> int:
    if not node.cards:
        return node.free_gpus
    return min(node.free_gpus, sum(1 for card in node.cards if card.is_free))
