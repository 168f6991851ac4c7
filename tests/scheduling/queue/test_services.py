"""Parking and activation (design §15.1), in PostgreSQL so every scheduler process shares them: backoff 1 s doubling
to 60 s, activation at once by the events that could make parked work fit, from wherever they happen."""

import threading
import time

import pytest
from django.db import connection
from django.utils import timezone

from nodes.models import Node
from nodes.services import node_heartbeat_apply, node_update
from plugins_admin.services import plugin_update
from scheduling.models import Task
from scheduling.queue.services import activation_mark, queue_activate, queue_park
from scheduling.queue.entries import take_active
from tenants.services import tenant_update
from tests.factories import make_node, make_task


def _backoff_seconds(task: Task) -> float:
    task.refresh_from_db()
    return (task.parked_until - timezone.now()).total_seconds()


def test_the_backoff_starts_at_one_second_and_doubles_up_to_sixty(tenant):
    task = make_task(tenant=tenant)
    seen = []
    for _ in range(8):
        queue_park(task_ids=[task.id], mark=activation_mark())
        seen.append(round(_backoff_seconds(task)))

    assert seen == [1, 2, 4, 8, 16, 32, 60, 60]
    assert task.queue_backoff == 8


def test_a_parked_task_is_taken_again_once_its_backoff_has_run_out(tenant):
    task = make_task(tenant=tenant)
    queue_park(task_ids=[task.id], mark=activation_mark())
    assert take_active(10) == []

    time.sleep(1.1)

    assert [entry.id for entry in take_active(10)] == [task.id]


def test_parking_leaves_the_task_active_when_an_event_came_while_the_cycle_decided(tenant):
    task = make_task(tenant=tenant)
    mark = activation_mark()  # the cycle reads this before its snapshot
    queue_activate(reason="a node freed cards meanwhile")

    queue_park(task_ids=[task.id], mark=mark)

    task.refresh_from_db()
    assert task.parked_until is None and task.queue_backoff == 1


def test_parking_a_gang_parks_its_pending_members_and_nothing_that_is_not_pending(tenant):
    from tests.scheduling.groups.test_gang import training_group

    gang = training_group(tenant, world_size=2)
    running = make_task(tenant=tenant, status="running")

    assert queue_park(group_ids=[gang.id], task_ids=[running.id], mark=activation_mark()) == 2
    assert not Task.objects.filter(group=gang, parked_until__isnull=True).exists()
    assert Task.objects.get(id=running.id).parked_until is None


def test_activation_is_narrowed_to_the_gpu_types_and_the_tenant_it_concerns(tenant, other_tenant):
    nvidia = make_task(tenant=tenant, gpu_type="nvidia")
    ascend = make_task(tenant=tenant, gpu_type="ascend")
    untyped = make_task(tenant=tenant)
    others = make_task(tenant=other_tenant, gpu_type="nvidia")
    every = [nvidia.id, ascend.id, untyped.id, others.id]

    queue_park(task_ids=every, mark=activation_mark())
    queue_activate(reason="ascend cards freed", gpu_types=["ascend"])
    assert set(Task.objects.filter(parked_until__isnull=True).values_list("id", flat=True)) == {ascend.id, untyped.id}

    queue_park(task_ids=every, mark=activation_mark())
    queue_activate(reason="tenant changed", tenant_id=other_tenant.id)
    assert set(Task.objects.filter(parked_until__isnull=True).values_list("id", flat=True)) == {others.id}


def _parked(tenant) -> Task:
    task = make_task(tenant=tenant, gpu_type="nvidia")
    queue_park(task_ids=[task.id], mark=activation_mark())
    return task


def _is_active(task: Task) -> bool:
    task.refresh_from_db()
    return task.parked_until is None


_CARD = {"uuid": "u0", "type": "nvidia", "model": "A100", "memory_total_mb": 81920, "memory_used_mb": 0,
         "utilization": 0, "temperature": 40, "numa": None}


@pytest.mark.parametrize("event", ["comes online", "heartbeat changes its cards", "admin edit", "plugin change",
                                   "tenant change"])
def test_events_that_could_make_parked_work_fit_activate_it(tenant, event):
    node = make_node(cards=1, status=Node.Status.OFFLINE)
    node_heartbeat_apply(node=node, cpu_percent=1, memory_used_mb=1, gpus=[{"index": 0, **_CARD}], labels={})
    task = _parked(tenant)
    if event == "comes online":
        Node.objects.filter(id=node.id).update(status=Node.Status.OFFLINE)
        node_heartbeat_apply(node=node, cpu_percent=1, memory_used_mb=1, gpus=[{"index": 0, **_CARD}], labels={})
    elif event == "heartbeat changes its cards":
        node_heartbeat_apply(node=node, cpu_percent=1, memory_used_mb=1,
                             gpus=[{"index": 0, **_CARD}, {"index": 1, **_CARD, "uuid": "u1"}], labels={})
    elif event == "admin edit":
        node_update(node=node, labels={"rack": "r9"})
    elif event == "plugin change":
        plugin_update(name="spread", weight=3, actor=None)
    else:
        tenant_update(tenant_id=tenant.id, gpu_quota=10)
    assert _is_active(task)


def test_a_plain_heartbeat_leaves_parked_work_parked(tenant):
    node = make_node(cards=1)
    node_heartbeat_apply(node=node, cpu_percent=1, memory_used_mb=1, gpus=[{"index": 0, **_CARD}], labels={})
    task = _parked(tenant)

    node_heartbeat_apply(node=node, cpu_percent=2, memory_used_mb=2, gpus=[{"index": 0, **_CARD}], labels={})

    assert not _is_active(task)


@pytest.mark.django_db(transaction=True)
def test_an_event_committed_by_another_process_activates_tasks_a_cycle_parked_after_its_first_pass(tenant):
    """The event's transaction activates, a cycle parks meanwhile, the event commits: the after-commit pass
    activates what the cycle parked."""
    task = make_task(tenant=tenant)
    in_event, parked = threading.Event(), threading.Event()

    def event_source():
        from django.db import transaction

        try:
            with transaction.atomic():
                queue_activate(reason="cards freed")
                in_event.set()
                parked.wait(10)
        finally:
            connection.close()

    source = threading.Thread(target=event_source)
    source.start()
    in_event.wait(10)
    mark = activation_mark()  # after the event's first pass: the cycle sees nothing new
    queue_park(task_ids=[task.id], mark=mark)
    assert not _is_active(task)
    parked.set()
    source.join(10)

    assert _is_active(task)



@pytest.mark.django_db(transaction=True)
def test_work_one_scheduler_process_parked_is_parked_for_every_other_process(tenant):
    import os
    import subprocess
    import sys

    from django.conf import settings

    from tests.scheduling.test_concurrent_schedulers import _database_url

    make_node(cards=1)
    unplaceable = make_task(tenant=tenant, gpu_required=8)
    env = {**os.environ, "DATABASE_URL": _database_url(), "DJANGO_SETTINGS_MODULE": "heteroflow_site.settings",
           "PYTHONPATH": str(settings.BASE_DIR)}
    # A backoff longer than a process start, so the second process meets the task still parked.
    cycle = ("import django; django.setup(); from scheduling.queue import services; "
             "services.BACKOFF_INITIAL_SECONDS = 600; "
             "from scheduling.cycle.run import run_cycle; print(run_cycle().considered)")

    first = subprocess.run([sys.executable, "-c", cycle], env=env, cwd=settings.BASE_DIR, capture_output=True,
                           text=True, timeout=120)
    second = subprocess.run([sys.executable, "-c", cycle], env=env, cwd=settings.BASE_DIR, capture_output=True,
                            text=True, timeout=120)

    assert (first.stdout.split()[-1], second.stdout.split()[-1]) == ("1", "0"), first.stderr + second.stderr
    assert not _is_active(unplaceable) and take_active(10) == []
