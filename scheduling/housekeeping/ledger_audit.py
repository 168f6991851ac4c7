"""The ledger audit behind `manage.py audit_ledgers`: recount what the tasks say, compare with what is stored and
with what the agents last reported. Reads only; `scheduling.housekeeping.node_ledger.node_ledgers_correct` corrects.

Stored ledgers: each node's `gpu_used` (design §7). Host CPU cores and memory (design §16.1) have no stored ledger:
they are recounted from the active tasks and compared with the node's registered size. Tenant usage has no stored ledger (quotas sum the active tasks
when a cycle starts), so tenants are recounted and compared with their quotas only. The usage records of design
§17.4 are recounted from the tasks' timelines (`scheduling.usage.audit`). What agents report: the tasks
they confirmed running (`scheduled -> running` comes only from the agent) and each card's memory in use in the last
heartbeat. Agent disagreements are reported, never "fixed": the agent's next report or the liveness check settles
them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from nodes.models import GPU, Node
from scheduling.cache.gpu_ledger import gpu_used_recount
from scheduling.fair_share.quotas import tenant_gpu_usage
from scheduling.framework.occupancy import cards_held
from scheduling.framework.snapshot import HOST_EPSILON
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task, TaskStatus
from scheduling.usage.audit import UsageDifference, usage_differences
from tenants.models import Tenant


@dataclass(frozen=True)
class NodeLedger:
    node_id: int
    name: str
    stored_gpu_used: int
    recounted_gpu_used: int
    # Card indexes held by more than one whole-card active task.
    double_booked: tuple[int, ...] = ()
    # Cards with memory in use per the last heartbeat that no active task holds.
    busy_without_task: tuple[int, ...] = ()
    # Running tasks (confirmed by the agent) whose cards all showed no memory in use in the last heartbeat.
    idle_running_tasks: tuple[int, ...] = ()
    # Host CPU cores and memory the active tasks book, and the node's registered size (design §16.1).
    cpu_booked: float = 0.0
    cpu_cores: int = 0
    memory_booked_mb: int = 0
    memory_mb: int = 0
    gpu_total: int = 0
    # Quarantined cards no active task holds (design §17.3): never free.
    quarantined_idle: tuple[int, ...] = ()

    @property
    def free_cards(self) -> int:
        return max(self.gpu_total - self.recounted_gpu_used - len(self.quarantined_idle), 0)

    @property
    def host_overbooked(self) -> bool:
        return self.cpu_booked > self.cpu_cores + HOST_EPSILON or self.memory_booked_mb > self.memory_mb

    @property
    def gpu_used_wrong(self) -> bool:
        return self.stored_gpu_used != self.recounted_gpu_used

    @property
    def differs(self) -> bool:
        return bool(self.findings())

    def findings(self) -> list[str]:
        """One sentence per difference, for people."""
        found = []
        if self.gpu_used_wrong:
            found.append(f"gpu_used stored {self.stored_gpu_used}, active tasks hold {self.recounted_gpu_used}")
        if self.host_overbooked:
            found.append(f"active tasks book {self.cpu_booked:g} of {self.cpu_cores} CPU cores and "
                         f"{self.memory_booked_mb} of {self.memory_mb} MB of memory")
        for indexes, sentence in (
            (self.double_booked, "cards {} held by several whole-card tasks"),
            (self.busy_without_task, "agent reports memory in use on cards {}, no active task holds them"),
            (self.idle_running_tasks, "running tasks {} show no memory in use on their cards in the last heartbeat"),
        ):
            if indexes:
                found.append(sentence.format(", ".join(map(str, indexes))))
        return found


@dataclass(frozen=True)
class TenantLedger:
    name: str
    gpus_in_use: int
    quota: int | None

    @property
    def over_quota(self) -> int:
        return max(0, self.gpus_in_use - self.quota) if self.quota is not None else 0


@dataclass
class LedgerAudit:
    nodes: list[NodeLedger] = field(default_factory=list)
    tenants: list[TenantLedger] = field(default_factory=list)
    usage: list[UsageDifference] = field(default_factory=list)

    @property
    def differences(self) -> list[NodeLedger]:
        return [node for node in self.nodes if node.differs]


def ledger_audit() -> LedgerAudit:
    """Read every ledger and its recount. Reads only."""
    active = list(Task.objects.filter(status__in=ACTIVE_STATES, node__isnull=False)
                  .values_list("id", "node_id", "status", "gpus", "shard", "cpu_cores", "memory_mb"))
    cpu_booked: dict[int, float] = defaultdict(float)
    memory_booked: dict[int, int] = defaultdict(int)
    holders: dict[tuple[int, int], list[int]] = defaultdict(list)
    held: dict[int, set[int]] = defaultdict(set)
    running: dict[int, list[tuple[int, set[int]]]] = defaultdict(list)
    for task_id, node_id, status, gpus, shard, cpu_cores, memory_mb in active:
        cpu_booked[node_id] += cpu_cores
        memory_booked[node_id] += memory_mb
        cards = set(cards_held(gpus, shard))
        if not shard:
            # Shards share their card by design; only whole cards can be booked twice.
            for index in cards:
                holders[(node_id, index)].append(task_id)
        held[node_id] |= cards
        if status == TaskStatus.RUNNING and cards:
            running[node_id].append((task_id, cards))
    double_booked: dict[int, set[int]] = defaultdict(set)
    for (node_id, index), tasks in holders.items():
        if len(tasks) > 1:
            double_booked[node_id].add(index)
    busy_cards: dict[int, set[int]] = defaultdict(set)
    for node_id, index in GPU.objects.filter(memory_used_mb__gt=0).values_list("node_id", "index"):
        busy_cards[node_id].add(index)
    quarantined: dict[int, set[int]] = defaultdict(set)
    for node_id, index in GPU.objects.filter(quarantined_at__isnull=False).values_list("node_id", "index"):
        quarantined[node_id].add(index)

    audit = LedgerAudit()
    for node_id, name, stored, recount, cpu_cores, memory_gb, gpu_total in (
            Node.objects.annotate(recount=gpu_used_recount()).order_by("name")
            .values_list("id", "name", "gpu_used", "recount", "cpu_cores", "memory_gb", "gpu_total")):
        audit.nodes.append(NodeLedger(
            node_id=node_id, name=name, stored_gpu_used=stored, recounted_gpu_used=recount,
            double_booked=tuple(sorted(double_booked[node_id])),
            busy_without_task=tuple(sorted(busy_cards[node_id] - held[node_id])),
            idle_running_tasks=tuple(sorted(task_id for task_id, cards in running[node_id]
                                            if not cards & busy_cards[node_id])),
            cpu_booked=cpu_booked.get(node_id, 0.0), cpu_cores=cpu_cores,
            memory_booked_mb=memory_booked.get(node_id, 0), memory_mb=memory_gb * 1024,
            gpu_total=gpu_total, quarantined_idle=tuple(sorted(quarantined[node_id] - held[node_id])),
        ))
    usage = tenant_gpu_usage()
    for tenant_id, name, quota in Tenant.objects.order_by("name").values_list("id", "name", "gpu_quota"):
        audit.tenants.append(TenantLedger(name=name, gpus_in_use=usage.get(tenant_id) or 0, quota=quota))
    audit.usage = usage_differences()
    return audit
