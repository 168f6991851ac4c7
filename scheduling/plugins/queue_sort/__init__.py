"""queue-sort (always on; design §16.3, §17.1, seed 002's wait queue): the order a cycle takes its window of pending
work in, kube-scheduler's QueueSort point. Setting `order`: `priority` (the default, design §15.1 and the seed's
FIFO: priority, then creation, whatever the tenants' quotas), `fair-share` (design §17.4: within a priority, the
tenant with the lowest decayed usage ÷ nominal first, then creation; `scheduling.queue.fair_share_order`) or
`weighted`, seed 002's weighted wait queue:

    score = 0.4 × SLA + 0.3 × utilisation + 0.2 × priority / 100 + 0.1 × waiting

each term in [0, 1]: SLA = the share of its time to `deadline` already used, (now − created) / (deadline −
created), 1 once the deadline passed, 0 without a deadline; utilisation = the share of the cards of its GPU type
(all cards without one) allocated once it is placed, (allocated + its cards) / total, or allocated / total when its
cards are more than the free ones; waiting = its wait over an hour, at most 1. Highest score first; ties keep the
priority order. The cycle reorders the window it took from the queue (`scheduling.queue.weighted`); the scores are
pure functions here. docs/scheduling.md has a worked example. A deadline closer than SLA_MIN_SPAN_SECONDS after
submission counts as that far away.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from scheduling.framework.registry import QUEUE_SORT, PluginSetting, PluginSpec

NAME = "queue-sort"
PRIORITY, FAIR_SHARE, WEIGHTED = "priority", "fair-share", "weighted"
ORDERS = (PRIORITY, FAIR_SHARE, WEIGHTED)
# What the plugin page and the diagnostics say of each order.
ORDER_DESCRIPTIONS = {
    PRIORITY: "priority, then creation (FIFO within a priority)",
    FAIR_SHARE: "priority, then the tenant's decayed usage ÷ nominal (lowest first), then creation",
    WEIGHTED: "seed 002's weighted score of SLA, utilisation, priority and waiting time",
}
# Seed 002's weights: SLA remaining time, cluster utilisation, business level (priority), waiting time.
WEIGHTS = {"sla": 0.4, "utilisation": 0.3, "priority": 0.2, "waiting": 0.1}
# A wait this long counts fully.
WAITING_FULL_SECONDS = 3600.0
# A deadline sooner than this after submission counts as this far away: the SLA term of a deadline one second off
# would be 1 at the next cycle, twice the whole priority term, for any tenant who writes one. So capped it grows no
# faster than a ten-minute deadline's.
SLA_MIN_SPAN_SECONDS = 600.0


@dataclass(frozen=True)
class EntryFacts:
    """What the weighted score reads of a queue entry (a task, or a gang with its members' cards)."""

    priority: int
    created_at: datetime
    deadline: datetime | None
    gpu_type: str
    cards: int


@dataclass(frozen=True)
class Cards:
    allocated: int
    total: int


def terms(facts: EntryFacts, *, now: datetime, cards: Mapping[str, Cards]) -> dict[str, float]:
    """The four terms of the weighted score, each in [0, 1]. `cards`: allocated and total cards by GPU type (lower
    case), "" for the whole cluster."""
    sla = 0.0
    if facts.deadline is not None:
        span = max((facts.deadline - facts.created_at).total_seconds(), SLA_MIN_SPAN_SECONDS)
        used = (now - facts.created_at).total_seconds()
        sla = min(max(used / span, 0.0), 1.0)
    pool = cards.get(facts.gpu_type) or cards.get("") or Cards(0, 0)
    utilisation = 0.0
    if pool.total:
        adds = facts.cards if facts.cards <= pool.total - pool.allocated else 0
        utilisation = (pool.allocated + adds) / pool.total
    waiting = min(max((now - facts.created_at).total_seconds() / WAITING_FULL_SECONDS, 0.0), 1.0)
    return {"sla": sla, "utilisation": utilisation, "priority": facts.priority / 100, "waiting": waiting}


def weighted_score(facts: EntryFacts, *, now: datetime, cards: Mapping[str, Cards]) -> float:
    return sum(WEIGHTS[name] * value for name, value in terms(facts, now=now, cards=cards).items())


class QueueSort:
    name = NAME

    def __init__(self, order: str = PRIORITY) -> None:
        self.order = order


def factory(setting: PluginSetting) -> QueueSort:
    return QueueSort(order=setting.extra.get("order", PRIORITY))


SETTINGS_SCHEMA = {"type": "object", "additionalProperties": False, "properties": {
    "order": {"type": "string", "enum": list(ORDERS), "default": PRIORITY, "description": "the queue order"},
}}


SPEC = PluginSpec(NAME, factory, always_on=True, default=PluginSetting(NAME, True, 0, {"order": PRIORITY}),
                  kinds=frozenset({QUEUE_SORT}), settings_schema=SETTINGS_SCHEMA,
                  description="Queue order: priority then creation (FIFO, the default); fair-share: priority, then "
                              "decayed usage ÷ nominal, then creation; or a weighted order of SLA, utilisation, "
                              "priority and waiting time.")
