"""The recorded workload: the window's submissions as arrivals, on the cluster's nodes as if idle."""

import math
from datetime import timedelta

import pytest
from django.utils import timezone

from nodes.models import GPU, Node
from scheduling.models import Task
from scheduling.replay.recorded import recorded_config, recorded_workload, replay_cluster
from scheduling.replay.trace import MILLI
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


def created(task: Task, at) -> Task:
    Task.objects.filter(id=task.id).update(created_at=at)
    task.refresh_from_db()
    return task


def test_the_window_s_tasks_of_every_tenant_and_state_arrive_in_creation_order(tenant, other_tenant):
    now = timezone.now()
    later = created(make_task(tenant=other_tenant, gpu_required=1, status="failed"), now - HOUR)
    earlier = created(make_task(tenant=tenant, gpu_required=2, status="running"), now - 2 * HOUR)
    created(make_task(tenant=tenant, gpu_required=1), now - 30 * HOUR)
    make_node(cards=2)

    workload = recorded_workload(since=now - 24 * HOUR, until=now, default_duration=HOUR)

    assert [arrival.task.id for arrival in workload.arrivals] == [earlier.id, later.id]
    assert [arrival.at for arrival in workload.arrivals] == [22 * 3600.0, 23 * 3600.0]
    assert {arrival.task.tenant_id for arrival in workload.arrivals} == {tenant.id, other_tenant.id}


def test_a_task_keeps_its_submitted_shape(tenant):
    now = timezone.now()
    task = make_task(tenant=tenant, gpu_type="ascend", gpu_memory_mb=16384, gpu_compute_percent=30, cpu_cores=6,
                     memory_mb=24576, priority=80, labels={"gpu-model": "910B"})
    make_node(gpu_type="ascend", cards=2, memory_mb=65536)

    arrival, = recorded_workload(since=now - HOUR, until=now + HOUR, default_duration=HOUR).arrivals

    shape = arrival.task
    assert (shape.id, shape.gpu_type, shape.gpu_memory_mb, shape.gpu_compute_percent, shape.cpu_cores,
            shape.memory_mb, shape.priority, shape.labels) == (task.id, "ascend", 16384, 30, 6, 24576, 80,
                                                               {"gpu-model": "910B"})
    assert arrival.demand_milli == MILLI // 4   # 16 GB of the 64 GB cards


def test_durations_come_from_started_and_finished_else_the_default(tenant):
    now = timezone.now()
    since = now - 24 * HOUR
    ran = created(make_task(tenant=tenant, gpu_required=1, status="succeeded", started_at=now - 5 * HOUR,
                            finished_at=now - 3 * HOUR), now - 6 * HOUR)
    running = created(make_task(tenant=tenant, gpu_required=1, status="running", started_at=now - 2 * HOUR),
                      now - 2 * HOUR)
    pending = created(make_task(tenant=tenant, gpu_required=1), now - HOUR)
    make_node(cards=2)

    workload = recorded_workload(since=since, until=now, default_duration=timedelta(minutes=45))

    leaves = {arrival.task.id: arrival.leaves_at for arrival in workload.arrivals}
    assert leaves[ran.id] == pytest.approx((ran.created_at - since).total_seconds() + 2 * 3600)
    assert leaves[running.id] == math.inf
    assert leaves[pending.id] == pytest.approx((pending.created_at - since).total_seconds() + 45 * 60)
    assert (workload.finished, workload.still_running, workload.never_started) == (1, 1, 1)


def test_the_cluster_is_every_uncordoned_node_idle_with_its_cards(tenant):
    busy = make_node(name="busy", cards=2, model="H100", status="offline", gpu_used=2, cpu_percent=70,
                     memory_used_mb=9000, labels={"zone": "a"})
    GPU.objects.filter(node=busy).update(memory_used_mb=50000, utilization=90, temperature=70)
    make_task(tenant=tenant, gpu_required=2, status="running", node=busy, gpus=[0, 1], card_type="nvidia")
    make_node(name="cordoned", cards=4, schedulable=False)

    snapshot = replay_cluster()

    node, = snapshot.nodes
    assert (node.name, node.status, node.gpu_used, node.cpu_percent, node.memory_used_mb, node.labels) == (
        "busy", "online", 0, 0.0, 0, {"zone": "a"})
    assert [(card.model, card.memory_total_mb, card.memory_used_mb, card.active_tasks) for card in node.cards] == [
        ("H100", 81920, 0, 0)] * 2
    assert Node.objects.get(name="busy").gpu_used == 2, "the node table is only read"


def test_the_load_thresholds_are_left_to_the_replay_s_request_check(settings):
    config = recorded_config()
    assert (config.cpu_percent, config.memory_percent) == (100, 100)
    assert config.gpu_reserve_fixed_mb == settings.SCHEDULER["gpu_reserve_fixed_mb"]
