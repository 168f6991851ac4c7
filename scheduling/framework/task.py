"""A task as the scheduler sees it: a plain dataclass, no ORM. Apart from the snapshot so that the quota book
(`scheduling.fair_share.book`), which the snapshot carries, can read tasks without importing the snapshot."""

from dataclasses import dataclass, field
from datetime import datetime


def is_fractional(gpu_required: int, gpu_memory_mb: int) -> bool:
    """A task asks for part of one card (a shard, design §7) when it wants no whole card but some card memory."""
    return gpu_required == 0 and gpu_memory_mb > 0


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
    # design §16.3 (`nodes.taints`).
    tolerations: list[dict[str, str]] = field(default_factory=list)
    node_selector: dict[str, str] = field(default_factory=dict)
    # What the node pulls before it starts (design §17.2, model distribution): nodes holding them score higher.
    image: str = ""
    model: str = ""

    @property
    def is_fractional(self) -> bool:
        return is_fractional(self.gpu_required, self.gpu_memory_mb)
