"""design §17.2: a disruption budget holds when two drains of two nodes race for the group's last spare replica —
the group's members and row are locked in the transaction that stops the replica, so only one drain takes it (real
threads, PostgreSQL)."""

import threading

import pytest
from django.db import connection

from nodes.models import Node
from scheduling import lifecycle
from scheduling.groups.services import task_group_create
from scheduling.hardware.drain import node_drain
from scheduling.models import GroupEvent, Task
from scheduling.services.task_transition import task_transition
from tests.factories import make_node

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_drains_at_once_take_one_replica_of_a_3_of_2_budget(tenant, admin_user):
    """Both nodes have drained past the group's ready timeout (their replacements never became ready), so each drain
    asks the budget alone: one may stop its replica, the other must wait."""
    from datetime import timedelta

    from django.utils import timezone

    nodes = [make_node(cards=2) for _ in range(3)]
    group = task_group_create(tenant=tenant, name="svc", type="inference", world_size=1, gpus_per_worker=1,
                              image="vllm:1", replicas=3, min_available=2)
    originals = list(group.members.order_by("rank"))
    for task, node in zip(originals, nodes, strict=True):
        task_transition(task.id, "pending", "scheduled", node=node, gpus=[0])
        task_transition(task.id, "scheduled", "running")
    Node.objects.filter(id__in=[node.id for node in nodes[:2]]).update(
        schedulable=False, drain_state="draining",
        drain_started_at=timezone.now() - timedelta(seconds=group.ready_timeout_seconds + 1))
    barrier = threading.Barrier(2)
    errors = []

    def drain(node_id):
        try:
            barrier.wait()
            node_drain(node=Node.objects.get(id=node_id), grace_seconds=None, actor=admin_user)
        except Exception as error:  # noqa: BLE001 - the assertion below names it
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=drain, args=(node.id,)) for node in nodes[:2]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    statuses = sorted(Task.objects.filter(id__in=[task.id for task in originals]).values_list("status", flat=True))
    assert statuses == [lifecycle.RUNNING, lifecycle.RUNNING, lifecycle.STOPPING]
    assert GroupEvent.objects.filter(group=group, kind="BudgetHeld").count() == 1
