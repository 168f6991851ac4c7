"""A task taken off failed hardware goes back through the preemption stop path without counting as a preemption,
and goes to the front of the queue at once (design §17.3)."""

import pytest

from nodes.models import Node
from scheduling import lifecycle
from scheduling.hardware.evict import evict_task, tasks_on_cards
from scheduling.models import Task
from scheduling.preemption.settle import settle_preempted
from scheduling.queue import immediate_queue
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db


def test_only_the_tasks_holding_the_failed_card_are_found(tenant):
    node = make_node(cards=4)
    on_it = make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=[1, 2], gpu_required=2,
                      card_type="nvidia")
    shard = make_task(tenant=tenant, status=lifecycle.SCHEDULED, node=node, gpus=[2], shard={"card": 2},
                      gpu_memory_mb=1000)
    make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=[3], gpu_required=1, card_type="nvidia")
    make_task(tenant=tenant, status=lifecycle.STOPPING, node=node, gpus=[2], gpu_required=1, card_type="nvidia")
    found = tasks_on_cards(node_id=node.id, node_gpu_type="nvidia", cards=[("nvidia", 2)])
    assert sorted(found) == sorted([(on_it.id, lifecycle.RUNNING), (shard.id, lifecycle.SCHEDULED)])
    assert tasks_on_cards(node_id=node.id, node_gpu_type="nvidia", cards=[("ascend", 2)]) == []


def test_settling_a_hardware_eviction_keeps_the_count_and_queues_the_task_itself(
        tenant, django_capture_on_commit_callbacks):
    node = make_node(cards=2, gpu_used=1)
    task = make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=[0], gpu_required=1,
                     card_type="nvidia", preemptible=True, preempt_count=1)
    assert evict_task(task_id=task.id, status=lifecycle.RUNNING, reason=f"{lifecycle.CARD_FAILED_REASON}: test")
    immediate_queue.connection().delete(immediate_queue.QUEUE_KEY)
    with django_capture_on_commit_callbacks(execute=True):
        assert settle_preempted(task.id, forced=True)
    task.refresh_from_db()
    assert (task.status, task.preempt_count, task.preemptible) == (lifecycle.PENDING, 1, True)
    assert task.reason == f"{lifecycle.CARD_FAILED_REASON}: container stopped, back to pending"
    assert immediate_queue.drain() == [task.id]
    assert Node.objects.get(id=node.id).gpu_used == 0
    assert not Task.objects.filter(id=task.id, node__isnull=False).exists()
