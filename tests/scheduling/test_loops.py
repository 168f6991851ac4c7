from datetime import timedelta

import pytest
from django.utils import timezone

from nodes.models import Node
from scheduling.queue import immediate_queue
from scheduling.lifecycle import final_status_after_stop
from scheduling.housekeeping.loops import enforce_task_timeouts, recover_backlog, wake_borrowed_training
from scheduling.models import SchedulingAttempt, Task
from scheduling.queue.services import activation_mark, queue_park
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task


def bind(task, node, gpus):
    assert task_transition(task.id, "pending", "scheduled", node=node, gpus=gpus)


@pytest.mark.django_db
def test_backlog_recovery_returns_tasks_of_offline_nodes_and_unclaimed_ones_with_their_cards(tenant):
    offline = make_node(cards=8)
    online = make_node(cards=8)
    orphan = make_task(tenant=tenant, gpu_required=2)
    unclaimed = make_task(tenant=tenant, gpu_required=4)
    fresh = make_task(tenant=tenant, gpu_required=1)
    bind(orphan, offline, [0, 1])
    bind(unclaimed, online, [0, 1, 2, 3])
    bind(fresh, online, [4])
    Node.objects.filter(id=offline.id).update(status="offline")
    Task.objects.filter(id=unclaimed.id).update(scheduled_at=timezone.now() - timedelta(minutes=6))

    assert recover_backlog() == 2

    statuses = dict(Task.objects.values_list("id", "status"))
    assert (statuses[orphan.id], statuses[unclaimed.id], statuses[fresh.id]) == ("pending", "pending", "scheduled")
    offline.refresh_from_db()
    online.refresh_from_db()
    assert (offline.gpu_used, online.gpu_used) == (0, 1)
    assert Task.objects.get(id=orphan.id).node_id is None


@pytest.mark.django_db
def test_timeout_stops_overdue_tasks_and_their_stop_ends_failed_with_timeout(tenant, settings):
    settings.SCHEDULER = {**settings.SCHEDULER, "default_task_timeout": 7200}
    node = make_node(cards=8)
    overdue = make_task(tenant=tenant, gpu_required=2)
    recent = make_task(tenant=tenant, gpu_required=1)
    for task, gpus in ((overdue, [0, 1]), (recent, [2])):
        bind(task, node, gpus)
        task_transition(task.id, "scheduled", "running")
    Task.objects.filter(id=overdue.id).update(started_at=timezone.now() - timedelta(seconds=7201))

    assert enforce_task_timeouts() == 1

    overdue.refresh_from_db()
    assert (overdue.status, overdue.reason) == ("stopping", "Timeout")
    assert final_status_after_stop(overdue.reason) == "failed"
    assert task_transition(overdue.id, "stopping", final_status_after_stop(overdue.reason), reason="Timeout")
    node.refresh_from_db()
    assert node.gpu_used == 1
    recent.refresh_from_db()
    assert recent.status == "running" and final_status_after_stop(recent.reason) == "stopped"


@pytest.mark.django_db
def test_past_7200_s_a_batch_task_is_stopped_but_an_inference_replica_is_not(tenant_client, settings):
    """design §17.1: the default timeout is batch's and training's; a service runs until stopped, and a task or
    group may set its own."""
    settings.SCHEDULER = {**settings.SCHEDULER, "default_task_timeout": 7200}
    submitted = {
        "batch": tenant_client.post("/api/v1/tasks", {"name": "job", "gpu_required": 1}, format="json").data,
        "replica": tenant_client.post("/api/v1/task-groups", {"name": "svc", "type": "inference", "world_size": 1,
                                                              "gpus_per_worker": 1}, format="json").data,
        "short": tenant_client.post("/api/v1/tasks", {"name": "short", "gpu_required": 1, "type": "inference",
                                                      "timeout_seconds": 600}, format="json").data,
        "endless": tenant_client.post("/api/v1/tasks", {"name": "endless", "gpu_required": 1,
                                                        "timeout_seconds": None}, format="json").data,
    }
    ids = {name: body["members"][0]["task"] if "members" in body else body["id"] for name, body in submitted.items()}
    assert submitted["batch"]["timeout_seconds"] == 7200 and submitted["replica"]["timeout_seconds"] is None
    node = make_node(cards=8)
    for gpu, task_id in enumerate(ids.values()):
        assert task_transition(task_id, "pending", "scheduled", node=node, gpus=[gpu])
        assert task_transition(task_id, "scheduled", "running")
    started = Task.objects.get(id=ids["batch"]).started_at

    assert enforce_task_timeouts(now=started + timedelta(seconds=7199)) == 1  # `short`, after its own 600 s
    assert enforce_task_timeouts(now=started + timedelta(seconds=7201)) == 1

    statuses = dict(Task.objects.values_list("id", "status"))
    assert {name: statuses[task_id] for name, task_id in ids.items()} == {
        "batch": "stopping", "replica": "running", "short": "stopping", "endless": "running"}
    assert enforce_task_timeouts(now=started + timedelta(days=60)) == 0


@pytest.mark.django_db
def test_waiting_training_is_requeued_once_cards_of_its_type_free_up(tenant):
    node = make_node(cards=8)
    holder = make_task(tenant=tenant, gpu_required=8)
    bind(holder, node, list(range(8)))
    waiting = make_task(tenant=tenant, type="training", gpu_type="nvidia", gpu_required=4)
    SchedulingAttempt.objects.create(task=waiting, code="InsufficientResources")
    immediate_queue.connection().delete(immediate_queue.QUEUE_KEY)

    assert wake_borrowed_training() == 0

    task_transition(holder.id, "scheduled", "stopping")
    task_transition(holder.id, "stopping", "stopped")
    queue_park(task_ids=[waiting.id], mark=activation_mark())  # parked since, e.g. by a cycle that missed the room
    assert wake_borrowed_training() == 1
    assert immediate_queue.drain() == [waiting.id]
    assert Task.objects.get(id=waiting.id).parked_until is None
