"""What the scheduler knows of the cluster during one cycle: plain dataclasses, no ORM."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduling.fair_share.book import QuotaBook
from scheduling.framework.task import TaskInfo, is_fractional

__all__ = ["HOST_EPSILON", "CardInfo", "ClusterSnapshot", "NodeInfo", "SchedulerConfig", "TaskInfo", "TenancyView",
           "is_fractional"]

# Fractional CPU requests add up in floating point (0.1 + 0.2 > 0.3): a sum this close to the capacity fits.
HOST_EPSILON = 1e-9


@dataclass
class CardInfo:
    index: int
    uuid: str = ""
    type: str = ""
    model: str = ""
    memory_total_mb: int = 0
    memory_used_mb: int = 0
    utilization: float = 0.0
    temperature: float = 0.0
    numa: int | None = None
    # design §17.3: as the agent last reported it (ok, degraded, failed), and whether an admin must release it.
    health: str = "ok"
    quarantined: bool = False
    # Occupancy by active tasks, as the scheduler's ledger sees it.
    whole_card_tasks: int = 0
    shard_memory_mb: int = 0
    shard_compute_percent: int = 0
    shard_tasks: int = 0
    occupant_tenants: set[int] = field(default_factory=set)

    @property
    def active_tasks(self) -> int:
        return self.whole_card_tasks + self.shard_tasks

    @property
    def is_free(self) -> bool:
        return self.active_tasks == 0

    @property
    def memory_utilization_percent(self) -> float:
        return 100.0 * self.memory_used_mb / self.memory_total_mb if self.memory_total_mb else 0.0


@dataclass
class NodeInfo:
    id: int
    name: str
    status: str = "online"
    schedulable: bool = True
    dedicated_tenant_id: int | None = None
    region: str = ""
    zone: str = ""
    rack: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    gpu_type: str = ""
    gpu_total: int = 0
    gpu_used: int = 0
    cpu_cores: int = 0
    memory_gb: int = 0
    cpu_percent: float = 0.0
    memory_used_mb: int = 0
    internal_ip: str = ""
    public_ip: str | None = None
    # [{key, value, effect}] (design §16.3, `nodes.taints`).
    taints: list[dict[str, str]] = field(default_factory=list)
    inference_tasks: int = 0
    cards: list[CardInfo] = field(default_factory=list)
    # Host CPU cores and memory the node's active tasks book against its registered `cpu_cores` / `memory_gb`
    # (design §16.1): counted by `occupancy.assume`, never by plugins.
    cpu_booked: float = 0.0
    memory_booked_mb: int = 0
    # Cards held here for another task's reservation this cycle (design §16.3): others are refused `Reserved`.
    reserved_cards: int = 0
    # Its container runtime shows every card to every container (Hygon, MetaX, Biren: design §16.5), so it holds one
    # tenant's card-holding tasks at a time. The node agent's vendor table knows it; the snapshot's builder
    # (`scheduling.cache.card_visibility`) sets it.
    cards_visible_to_every_container: bool = False
    # Derived data the plugins compute once per snapshot (decoded topology, NVLink domains, ...); apply_bind clears it.
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def free_gpus(self) -> int:
        return max(self.gpu_total - self.gpu_used, 0)

    @property
    def host_cpu_free(self) -> float:
        return self.cpu_cores - self.cpu_booked

    @property
    def host_memory_free_mb(self) -> int:
        return self.memory_gb * 1024 - self.memory_booked_mb

    def host_room_for(self, cpu_cores: float, memory_mb: int) -> bool:
        """Whether the node's registered CPU cores and memory hold its booked requests plus these (design §16.1)."""
        return cpu_cores <= self.host_cpu_free + HOST_EPSILON and memory_mb <= self.host_memory_free_mb

    @property
    def gpu_types(self) -> set[str]:
        """The node's GPU type label and every card's type."""
        types = {card.type for card in self.cards if card.type}
        if self.gpu_type:
            types.add(self.gpu_type)
        return types


@dataclass
class TenancyView:
    """Share groups as the scheduler sees them this cycle: tenant id → ids of the groups it is in."""

    groups_of: dict[int, frozenset[int]] = field(default_factory=dict)
    dedicated_tenant_ids: frozenset[int] = frozenset()


@dataclass
class ClusterSnapshot:
    nodes: list[NodeInfo]
    tenancy: TenancyView = field(default_factory=TenancyView)
    # Caps, per-type quotas, cohorts and usage (design §16.2); the cycle's binds keep the usage current.
    quotas: QuotaBook = field(default_factory=QuotaBook)
    # Tenants whose pending tasks are held (design §15.6).
    inactive_tenant_ids: frozenset[int] = frozenset()
    # Group id → its `group_spread.GroupSpread` (design §17.2), for the inference groups that spread their replicas.
    group_spread: dict[int, Any] = field(default_factory=dict)

    # The column view the framework evaluates filters and scores over (`scheduling.framework.table`), built lazily
    # once per snapshot and kept current by apply_bind.
    table: Any = field(default=None, repr=False, compare=False)
    # Per framework, which of its table's caches of shared plugin results it uses (`scheduling.framework.equivalence`).
    equivalence: dict[int, Any] = field(default_factory=dict, repr=False, compare=False)
    _by_id: dict[int, NodeInfo] | None = field(default=None, repr=False, compare=False)
    # Task shape → why no node could ever hold it, or None (`scheduling.framework.never_fits`).
    never_fits: dict[Any, str | None] = field(default_factory=dict, repr=False, compare=False)
    # (GPU type, needs cards, dedicated tenant) → the registered nodes such a task could ever be held by.
    never_fits_candidates: dict[Any, list] = field(default_factory=dict, repr=False, compare=False)

    def node(self, node_id: int) -> NodeInfo | None:
        if self._by_id is None or len(self._by_id) != len(self.nodes):
            self._by_id = {node.id: node for node in self.nodes}
        return self._by_id.get(node_id)


@dataclass(frozen=True)
class SchedulerConfig:
    """The design §13 figures the scheduler uses, read from settings once (never inside filter/score loops)."""

    gpu_reserve_fixed_mb: int = 500
    gpu_reserve_percent: float = 10
    inference_max_per_node: int = 16
    port_range_start: int = 8000
    port_range_end: int = 8999
    gpu_memory_percent: float = 95
    gpu_utilization_percent: float = 95
    cpu_percent: float = 90
    memory_percent: float = 90
    gpu_temperature_threshold: float = 79

    @classmethod
    def from_settings(cls, scheduler: Mapping[str, Any] | None = None) -> "SchedulerConfig":
        if scheduler is None:
            from django.conf import settings

            scheduler = settings.SCHEDULER
        thresholds = scheduler.get("load_thresholds", {})
        defaults = cls()
        return cls(
            gpu_reserve_fixed_mb=scheduler.get("gpu_reserve_fixed_mb", defaults.gpu_reserve_fixed_mb),
            gpu_reserve_percent=scheduler.get("gpu_reserve_percent", defaults.gpu_reserve_percent),
            inference_max_per_node=scheduler.get("inference_max_per_node", defaults.inference_max_per_node),
            port_range_start=scheduler.get("port_range_start", defaults.port_range_start),
            port_range_end=scheduler.get("port_range_end", defaults.port_range_end),
            gpu_memory_percent=thresholds.get("gpu_memory_percent", defaults.gpu_memory_percent),
            gpu_utilization_percent=thresholds.get("gpu_utilization_percent", defaults.gpu_utilization_percent),
            cpu_percent=thresholds.get("cpu_percent", defaults.cpu_percent),
            memory_percent=thresholds.get("memory_percent", defaults.memory_percent),
            gpu_temperature_threshold=thresholds.get("gpu_temperature_threshold", defaults.gpu_temperature_threshold),
        )

    def reserve_mb(self, memory_total_mb: int) -> float:
        """design §5: max(fixed MB, percent of the card)."""
        return max(self.gpu_reserve_fixed_mb, memory_total_mb * self.gpu_reserve_percent / 100)

    def card_free_mb(self, card: CardInfo) -> float:
        """Memory a new task may still take on `card`: total − reserve − max(reported used, booked shards).

        The heartbeat's `memory_used_mb` already contains what running shards really use (at most their booking),
        so adding both would count shards twice; the larger of the two covers shards booked but not yet started
        as well as memory held by processes the scheduler does not know about.
        """
        return card.memory_total_mb - self.reserve_mb(card.memory_total_mb) - max(card.memory_used_mb,
                                                                                   card.shard_memory_mb)

    def card_overloaded(self, card: CardInfo) -> bool:
        """Memory utilisation at or above the threshold (95 %): the card takes nothing new."""
        return card.memory_utilization_percent >= self.gpu_memory_percent
