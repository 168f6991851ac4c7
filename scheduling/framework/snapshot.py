"""What the scheduler knows of the cluster during one cycle: plain dataclasses, no ORM."""

from dataclasses import dataclass, field
from datetime import datetime


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
    # Occupancy by active tasks, as the scheduler's ledger sees it.
    whole_card_tasks: int = 0
    shard_memory_mb: int = 0
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
    inference_tasks: int = 0
    cards: list[CardInfo] = field(default_factory=list)

    @property
    def free_gpus(self) -> int:
        return max(self.gpu_total - self.gpu_used, 0)


@dataclass
class TaskInfo:
    id: int
    tenant_id: int
    name: str = ""
    type: str = "batch"
    gpu_type: str = ""
    gpu_required: int = 0
    gpu_memory_mb: int = 0
    gpu_compute_percent: int | None = None
    cpu_cores: float = 0.0
    memory_mb: int = 0
    priority: int = 50
    preemptible: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    created_at: datetime | None = None
    group_id: int | None = None

    @property
    def is_fractional(self) -> bool:
        return self.gpu_required == 0 and self.gpu_memory_mb > 0


@dataclass
class TenancyView:
    """Share groups as the scheduler sees them this cycle: tenant id → ids of the groups it is in."""

    groups_of: dict[int, frozenset[int]] = field(default_factory=dict)
    dedicated_tenant_ids: frozenset[int] = frozenset()


@dataclass
class ClusterSnapshot:
    nodes: list[NodeInfo]
    tenancy: TenancyView = field(default_factory=TenancyView)

    def node(self, node_id: int) -> NodeInfo | None:
        return next((node for node in self.nodes if node.id == node_id), None)
