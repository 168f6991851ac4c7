"""design §17.2: a disruption budget (`min_available`) holds a drain, a defrag move, a preemption and a rolling update
while stopping a replica would leave fewer ready ones, says so on the group's timeline (`BudgetHeld`), and lets
them proceed once enough replicas are ready; a budget above the replica count is a 400 naming it."""

import pytest

from nodes.models import Node
from scheduling import lifecycle
from scheduling.groups.budget import budget_permits
from scheduling.groups.rollout import drive_rollouts, task_group_update
from scheduling.groups.services import task_group_create
from scheduling.hardware.drain import drain_nodes
from scheduling.models import GroupEvent, Task
from scheduling.services.task_transition import task_transition
from tests.factories import make_node

pytestmark = pytest.mark.django_db


def _run(task, node, *, card=0):
    task_transition(task.id, "pending", "scheduled", node=node, gpus=[card])
    task_transition(task.id, "scheduled", "running")


def _service(tenant, replicas, **fields):
    return task_group_create(tenant=tenant, name="svc", type="inference", world_size=1, gpus_per_worker=1,
                             image="vllm:1", replicas=replicas, **fields)


def test_a_budget_of_3_of_3_holds_a_drain_until_a_fourth_replica_is_ready(admin_client, tenant):
    """The drain's own replacement is the fourth replica; once the replacement's wait is over (the group's ready
    timeout), the budget alone still holds the replica, and says so once."""
    from datetime import timedelta

    from django.utils import timezone

    nodes = [make_node(cards=2) for _ in range(4)]
    group = _service(tenant, 3, min_available=3)
    members = list(group.members.order_by("rank"))
    for task, node in zip(members, nodes, strict=False):
        _run(task, node)

    response = admin_client.post(f"/api/v1/nodes/{nodes[0].id}/drain", {}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["drain"]["tasks_left"] == 1
    assert Task.objects.get(id=members[0].id).status == lifecycle.RUNNING
    fourth = group.members.get(status=lifecycle.PENDING)

    Node.objects.filter(id=nodes[0].id).update(
        drain_started_at=timezone.now() - timedelta(seconds=group.ready_timeout_seconds + 1))
    drain_nodes()  # the replacement's wait is over, but stopping would leave 2 of 3 ready: the budget holds
    assert Task.objects.get(id=members[0].id).status == lifecycle.RUNNING
    held = GroupEvent.objects.get(group=group, kind="BudgetHeld")
    assert "drain of node" in held.message and held.figures == {"ready": 3, "min_available": 3,
                                                                "task": members[0].id}
    drain_nodes()  # the ticker waits too, and says it once
    assert GroupEvent.objects.filter(group=group, kind="BudgetHeld").count() == 1

    task_transition(fourth.id, "pending", "scheduled", node=nodes[3], gpus=[0])
    drain_nodes()  # scheduled is not ready: still held
    assert Task.objects.get(id=members[0].id).status == lifecycle.RUNNING
    task_transition(fourth.id, "scheduled", "running")

    drain_nodes()
    assert Task.objects.get(id=members[0].id).status == lifecycle.STOPPING


def test_a_readiness_probe_decides_what_counts_as_available(tenant):
    node = make_node(cards=4)
    group = _service(tenant, 2, min_available=1, readiness={"path": "/health", "port": None, "period_seconds": 10,
                                                             "failure_threshold": 3})
    first, second = group.members.order_by("rank")
    _run(first, node, card=0)
    _run(second, node, card=1)
    Task.objects.filter(id=first.id).update(ready=True)
    # The only ready replica may not go; the unready one serves nothing and may.
    assert not budget_permits(task_id=first.id, action="defragmentation")
    assert budget_permits(task_id=second.id, action="defragmentation")
    Task.objects.filter(id=second.id).update(ready=True)
    assert budget_permits(task_id=first.id, action="defragmentation")


def test_a_rolling_update_waits_for_the_budget_not_only_for_max_unavailable(tenant):
    node = make_node(cards=8)
    group = _service(tenant, 2, min_available=2, max_surge=0, max_unavailable=1)
    for index, task in enumerate(group.members.order_by("rank")):
        _run(task, node, card=index)
    task_group_update(group=group, image="vllm:2")

    drive_rollouts()
    assert group.members.filter(status=lifecycle.STOPPING).count() == 0
    assert GroupEvent.objects.filter(group=group, kind="BudgetHeld", message__contains="rolling update").exists()


def test_a_budget_above_the_replica_count_is_a_400_naming_it_and_nothing_is_written(tenant_client):
    client = tenant_client
    body = {"name": "svc", "type": "inference", "world_size": 1, "gpus_per_worker": 1, "image": "vllm:1",
            "command": "serve", "replicas": 2, "min_available": 3}
    response = client.post("/api/v1/task-groups", body, format="json")
    assert response.status_code == 400 and response.json()["field"] == "min_available", response.content
    training = {**body, "type": "training", "replicas": None, "min_available": 1}
    response = client.post("/api/v1/task-groups", training, format="json")
    assert response.status_code == 400 and response.json()["field"] == "min_available", response.content
    assert not Task.objects.exists() and not Node.objects.exists()
