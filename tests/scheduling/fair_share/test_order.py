"""Fair-share order among equal priorities (design §16.2)."""

import random
from datetime import datetime, timedelta, timezone

import pytest

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.fair_share.book import QuotaBook, TypeQuota
from scheduling.queue.fair_share_order import fair_share_order
from scheduling.models import Task
from scheduling.queue.entries import GANG, TASK, QueueEntry
from tenants.models import Tenant, TenantGpuQuota
from tests.factories import make_node, make_task

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_equal_priorities_go_by_dominant_share_then_creation_and_priority_still_comes_first():
    book = QuotaBook(nominal={1: {"nvidia": TypeQuota(400)}, 2: {"nvidia": TypeQuota(400)}})
    book.add_usage(1, "nvidia", False, 300)
    book.add_usage(2, "nvidia", False, 100)
    entries = [QueueEntry(TASK, 1, 50, T0, 1), QueueEntry(GANG, 2, 50, T0 + timedelta(1), 2),
               QueueEntry(TASK, 3, 50, T0 + timedelta(2), 2), QueueEntry(TASK, 4, 90, T0 + timedelta(3), 1),
               QueueEntry(TASK, 5, 50, T0 + timedelta(4), 3)]

    # tenant 3 has no quota rows: share 1, after tenant 1's 0.75.
    assert [entry.id for entry in fair_share_order(entries, book)] == [4, 2, 3, 1, 5]


@pytest.mark.django_db
def test_the_tenant_with_the_lower_dominant_share_binds_first():
    busy, idle = (Tenant.objects.create(name=name) for name in ("busy", "idle"))
    for tenant in (busy, idle):
        TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=4)
    node = make_node(cards=4)
    make_task(tenant=busy, gpu_type="nvidia", gpu_required=2, status=lifecycle.RUNNING, node=node, gpus=[0, 1],
              card_type="nvidia")
    node.gpu_used = 2
    node.save()
    first = make_task(tenant=busy, gpu_type="nvidia", gpu_required=2)
    second = make_task(tenant=idle, gpu_type="nvidia", gpu_required=2)

    run_cycle(rng=random.Random(1))

    assert Task.objects.get(id=second.id).status == lifecycle.SCHEDULED
    assert Task.objects.get(id=first.id).status == lifecycle.PENDING
