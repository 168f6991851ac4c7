"""Snapshot builders for the pure-Python framework and plugin tests (no database)."""

import itertools

from scheduling.cache.node_info import note_card_visibility
from scheduling.framework.interfaces import CycleState
from scheduling.framework.snapshot import CardInfo, ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo, TenancyView

_ids = itertools.count(1)
CONFIG = SchedulerConfig()


def make_cards(count: int, *, gpu_type: str = "nvidia", model: str = "A100", memory_mb: int = 81920,
               numa: list[int | None] | None = None) -> list[CardInfo]:
    return [CardInfo(index=i, uuid=f"gpu-{i}", type=gpu_type, model=model, memory_total_mb=memory_mb,
                     numa=numa[i] if numa else None) for i in range(count)]


def make_node(*, cards: int = 8, gpu_type: str = "nvidia", model: str = "A100", memory_mb: int = 81920,
              **fields) -> NodeInfo:
    node_id = fields.pop("id", next(_ids))
    fields.setdefault("name", f"node-{node_id}")
    fields.setdefault("cpu_cores", 64)
    fields.setdefault("memory_gb", 512)
    card_list = fields.pop("card_list", None) or make_cards(cards, gpu_type=gpu_type, model=model, memory_mb=memory_mb)
    node = NodeInfo(id=node_id, gpu_type=gpu_type if card_list else "", gpu_total=len(card_list), cards=card_list,
                    **fields)
    note_card_visibility(node)
    return node


def make_task(**fields) -> TaskInfo:
    fields.setdefault("id", next(_ids))
    fields.setdefault("tenant_id", 1)
    return TaskInfo(**fields)


def make_state(tenancy: TenancyView | None = None) -> CycleState:
    return CycleState(CONFIG, tenancy)


def make_snapshot(*nodes: NodeInfo, tenancy: TenancyView | None = None) -> ClusterSnapshot:
    return ClusterSnapshot(nodes=list(nodes), tenancy=tenancy or TenancyView())


def occupy(card: CardInfo, tenant_id: int, *, shard_mb: int = 0) -> CardInfo:
    if shard_mb:
        card.shard_tasks += 1
        card.shard_memory_mb += shard_mb
    else:
        card.whole_card_tasks += 1
    card.occupant_tenants.add(tenant_id)
    return card
