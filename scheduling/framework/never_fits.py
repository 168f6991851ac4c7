"""Work that no registered node could ever hold, even empty (`NeverFits`).

A 64-card task on a cluster of 8-card nodes would otherwise wait forever behind "quota exceeded" or "0/41 nodes
are available: 41 Insufficient GPU", which reads as "wait". It is still accepted (nodes may join later), but its
reason says what the largest node of its GPU type offers and the way out, ahead of every other reason. The cycle,
the gang placement and the submit response all ask `never_fits`, so the three say the same thing.

A node counts by what it is registered with (cards, each card's memory, CPU cores, memory), whatever its state:
an offline or cordoned node comes back. A node that has not reported its GPUs yet is not counted for a task that
needs GPUs: nothing is known of it. No node of the type at all is `GPU type mismatch`'s to say, not this.
Django-free: the cycle's snapshot and the submit service's node rows both become `NodeInfo`s.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from scheduling.framework.snapshot import HOST_EPSILON, ClusterSnapshot, NodeInfo, TaskInfo


@dataclass(frozen=True)
class _Shape:
    """What of a task decides whether an empty node could hold it."""

    gpu_type: str
    gpu_required: int
    shard_memory_mb: int
    cpu_cores: float
    memory_mb: int

    @classmethod
    def of(cls, *, gpu_type: str, gpu_required: int, gpu_memory_mb: int, cpu_cores: float,
           memory_mb: int) -> "_Shape":
        fractional = gpu_required == 0 and gpu_memory_mb > 0
        return cls(gpu_type, gpu_required, gpu_memory_mb if fractional else 0, cpu_cores, memory_mb)

    @property
    def needs_cards(self) -> bool:
        return self.gpu_required > 0 or self.shard_memory_mb > 0


def _largest_card_mb(node: NodeInfo) -> int:
    return max((card.memory_total_mb for card in node.cards), default=0)


def _candidates(shape: _Shape, tenant_id: int, nodes: Iterable[NodeInfo]) -> list[NodeInfo]:
    """The registered nodes of the task's type (any node, for a task without a type or cards) that are not
    dedicated to another tenant."""
    nodes = [node for node in nodes if node.dedicated_tenant_id in (None, tenant_id)]
    if shape.gpu_type:
        return [node for node in nodes if shape.gpu_type in node.gpu_types]
    if shape.needs_cards:
        return [node for node in nodes if node.gpu_total > 0]
    return nodes


def _holds(shape: _Shape, node: NodeInfo) -> bool:
    card_mb = _largest_card_mb(node)
    return (shape.gpu_required <= node.gpu_total
            and (not shape.shard_memory_mb or not card_mb or shape.shard_memory_mb <= card_mb)
            and shape.cpu_cores <= node.cpu_cores + HOST_EPSILON
            and shape.memory_mb <= node.memory_gb * 1024)


def _message(shape: _Shape, nodes: list[NodeInfo]) -> str:
    largest = max(nodes, key=lambda node: (node.gpu_total, _largest_card_mb(node), node.cpu_cores,
                                           node.memory_gb))
    most_cards = max(node.gpu_total for node in nodes)
    most_card_mb = max(_largest_card_mb(node) for node in nodes)
    most_cpu = max(node.cpu_cores for node in nodes)
    most_memory_mb = max(node.memory_gb for node in nodes) * 1024
    kind = f"{shape.gpu_type} " if shape.gpu_type else ""
    over, ways_out = [], []
    if shape.gpu_required > most_cards:
        over.append(f"{shape.gpu_required} GPUs (at most {most_cards} on one node)")
        workers = -(-shape.gpu_required // most_cards) if most_cards else 0
        if workers:
            ways_out.append(f"use a task group with world_size (e.g. world_size {workers} with gpus_per_worker "
                            f"{-(-shape.gpu_required // workers)}) to spread the cards over nodes")
    if shape.shard_memory_mb and most_card_mb and shape.shard_memory_mb > most_card_mb:
        over.append(f"{shape.shard_memory_mb} MB of one card (the largest card has {most_card_mb} MB)")
        ways_out.append("ask for whole cards (gpu_required) or for less card memory")
    if shape.cpu_cores > most_cpu + HOST_EPSILON:
        over.append(f"{shape.cpu_cores:g} CPU cores (at most {most_cpu} on one node)")
        ways_out.append(f"ask for at most {most_cpu} CPU cores")
    if shape.memory_mb > most_memory_mb:
        over.append(f"{shape.memory_mb} MB of memory (at most {most_memory_mb} MB on one node)")
        ways_out.append(f"ask for at most {most_memory_mb} MB of memory")
    if not over:
        # Each figure fits some node, but no node has them all at once.
        over.append("more at once than any one node has")
        ways_out.append("ask for less, within one node's figures")
    return (f"no registered {kind}node can ever hold this task: it asks for {'; '.join(over)}. The largest node "
            f"has {largest.gpu_total} GPUs, {_largest_card_mb(largest)} MB per card, "
            f"{largest.cpu_cores} CPU cores, {largest.memory_gb} GB of memory. Way out: {'; '.join(ways_out)}.")


def never_fits_message(*, tenant_id: int, gpu_type: str, gpu_required: int, gpu_memory_mb: int, cpu_cores: float,
                       memory_mb: int, nodes: Iterable[NodeInfo]) -> str | None:
    """Why no node of `nodes` could ever hold a task of `tenant_id` with these figures, with the way out; None
    when one could (or when none of the task's type is registered)."""
    shape = _Shape.of(gpu_type=gpu_type, gpu_required=gpu_required, gpu_memory_mb=gpu_memory_mb,
                      cpu_cores=cpu_cores, memory_mb=memory_mb)
    return _verdict(shape, tenant_id, nodes)


def _verdict(shape: _Shape, tenant_id: int, nodes: Iterable[NodeInfo]) -> str | None:
    return _verdict_among(shape, _candidates(shape, tenant_id, nodes))


def _verdict_among(shape: _Shape, candidates: list[NodeInfo]) -> str | None:
    if not candidates or any(_holds(shape, node) for node in candidates):
        return None
    return _message(shape, candidates)


def never_fits(task: TaskInfo, snapshot: ClusterSnapshot) -> str | None:
    """`never_fits_message` for a task of the cycle, once per task shape and snapshot (node sizes do not change
    within a cycle; in-memory binds change only usage). The candidate nodes are found once per GPU type and tenant
    dedication: tasks of a cycle have many shapes but few types."""
    shape = _Shape.of(gpu_type=task.gpu_type, gpu_required=task.gpu_required, gpu_memory_mb=task.gpu_memory_mb,
                      cpu_cores=task.cpu_cores, memory_mb=task.memory_mb)
    tenant_key = task.tenant_id if task.tenant_id in snapshot.tenancy.dedicated_tenant_ids else None
    verdicts = snapshot.never_fits
    if (shape, tenant_key) not in verdicts:
        candidates_key = (shape.gpu_type, shape.needs_cards, tenant_key)
        candidates = snapshot.never_fits_candidates.get(candidates_key)
        if candidates is None:
            candidates = snapshot.never_fits_candidates[candidates_key] = _candidates(
                shape, task.tenant_id, snapshot.nodes)
        verdicts[(shape, tenant_key)] = _verdict_among(shape, candidates)
    return verdicts[(shape, tenant_key)]
