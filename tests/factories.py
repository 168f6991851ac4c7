"""Small builders for test data; plain functions so that every test reads what it sets up."""

import itertools
from datetime import timedelta

from django.utils import timezone

from nodes.models import GPU, Node
from scheduling.models import Task
from scheduling.services.task_create import BY_TYPE, timeout_for
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
    # The timeout task creation gives a task of its type (design §17.1).
    fields.setdefault("timeout_seconds", timeout_for(type=fields.get("type", "batch"), timeout_seconds=BY_TYPE))
    return Task.objects.create(tenant=tenant, **fields)


def ledger_mismatches() -> list[tuple[str, int, int]]:
    """(node, stored gpu_used, SUM of its active tasks' gpu_required) for every node where the two ledgers of design §7
    disagree; empty when they all agree."""
    from django.db.models import Sum

    from scheduling.lifecycle import ACTIVE_STATES

    held = dict(Task.objects.filter(status__in=ACTIVE_STATES, node__isnull=False).values("node_id")
                .annotate(total=Sum("gpu_required")).values_list("node_id", "total"))
    return [(name, used, held.get(node_id, 0)) for node_id, name, used in
            Node.objects.values_list("id", "name", "gpu_used") if used != held.get(node_id, 0)]


def end_backoffs() -> int:
    """As if every parked task's backoff had run out (design §15.1), for tests that retry failed work at once."""
    return Task.objects.filter(parked_until__isnull=False).update(parked_until=timezone.now() - timedelta(seconds=1))
