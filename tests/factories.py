"""Small builders for test data; plain functions so that every test reads what it sets up."""

import itertools
from datetime import timedelta

from django.utils import timezone

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


def end_backoffs() -> int:
    """As if every parked task's backoff had run out (SPEC §15.1), for tests that retry failed work at once."""
    return Task.objects.filter(parked_until__isnull=False).update(parked_until=timezone.now() - timedelta(seconds=1))
