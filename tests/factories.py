"""Small builders for test data; plain functions so that every test reads what it sets up."""

import itertools

from nodes.models import GPU, Node
from scheduling.models import Task
from tenants.models import Tenant

_names = itertools.count(1)


def make_node(*, gpu_type: str = "nvidia", cards: int = 8, model: str = "A100", memory_mb: int = 81920,
              status: str = "online", numa: list[int | None] | None = None, **fields) -> Node:
    fields.setdefault("name", f"node-{next(_names)}")
    fields.setdefault("cpu_cores", 64)
    fields.setdefault("memory_gb", 512)
    node = Node.objects.create(gpu_type=gpu_type if cards else "", gpu_total=cards, status=status, **fields)
    GPU.objects.bulk_create(
        GPU(node=node, index=i, uuid=f"{node.name}-gpu-{i}", type=gpu_type, model=model, memory_total_mb=memory_mb,
            numa=(numa[i] if numa else None))
        for i in range(cards)
    )
    return node


def make_task(*, tenant: Tenant, **fields) -> Task:
    fields.setdefault("name", f"task-{next(_names)}")
    return Task.objects.create(tenant=tenant, **fields)
