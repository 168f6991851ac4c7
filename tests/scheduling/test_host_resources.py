"""Host CPU cores and memory booked on a node while its tasks are active (design §16.1): bind refuses a node they
would overfill, the snapshot counts them so one cycle never overfills a node, `audit_ledgers` recounts them."""

from io import StringIO

import pytest
from django.core.management import call_command

from scheduling import lifecycle
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, task_info_from_row
from scheduling.cycle.run import run_cycle
from scheduling.framework import reasons
from scheduling.framework.occupancy import Occupant, assume, forget
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.housekeeping.ledger_audit import ledger_audit
from scheduling.models import SchedulingAttempt, Task, TaskEvent
from scheduling.plugins.resource_prefilter import INSUFFICIENT_HOST
from tests.factories import end_backoffs, make_node, make_task
from tests.scheduling.bind.single import bind_task
from tests.scheduling.framework.builders import make_node as make_node_info

pytestmark = pytest.mark.django_db

FORTY_GB = 40 * 1024


def _info(task):
    return task_info_from_row(Task.objects.filter(id=task.id).values_list(*TASK_INFO_FIELDS).get())


def test_assume_books_and_forget_returns_the_host_resources():
    node = make_node_info(cards=2)
    occupant = Occupant(7, "batch", (0,), ledger_gpus=1, cpu_cores=2.5, memory_mb=4096)
    assume(node, occupant)
    assert (node.cpu_booked, node.memory_booked_mb) == (2.5, 4096)
    forget(node, occupant)
    assert (node.cpu_booked, node.memory_booked_mb) == (0.0, 0)


def test_the_snapshot_counts_what_active_tasks_book(tenant):
    node = make_node(cards=4, cpu_cores=16, memory_gb=64)
    make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=[0], gpu_required=1, cpu_cores=3.5,
              memory_mb=2048)
    make_task(tenant=tenant, status=lifecycle.SUCCEEDED, node=node, gpus=[1], gpu_required=1, cpu_cores=8,
              memory_mb=8192)
    info = build_snapshot().node(node.id)
    assert (info.cpu_booked, info.memory_booked_mb) == (3.5, 2048)
    assert (info.host_cpu_free, info.host_memory_free_mb) == (12.5, 64 * 1024 - 2048)


@pytest.mark.parametrize("asked", [{"memory_mb": FORTY_GB}, {"cpu_cores": 6}])
def test_bind_refuses_a_node_the_task_would_overfill_and_changes_nothing(tenant, asked):
    node = make_node(cards=4, cpu_cores=8, memory_gb=64)
    stale = build_snapshot().node(node.id)
    make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=[0], gpu_required=1, cpu_cores=4,
              memory_mb=FORTY_GB)
    task = make_task(tenant=tenant, gpu_required=1, **asked)

    outcome = bind_task(_info(task), stale, [1], config=SchedulerConfig())

    assert outcome.code == reasons.INSUFFICIENT_HOST_RESOURCES
    assert "node " + node.name in outcome.message
    task.refresh_from_db()
    assert (task.status, task.node_id) == (lifecycle.PENDING, None)
    assert not TaskEvent.objects.filter(task=task).exists()


def test_bind_takes_a_task_that_fits_beside_what_is_booked(tenant):
    node = make_node(cards=4, cpu_cores=8, memory_gb=64)
    make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=[0], gpu_required=1, cpu_cores=4,
              memory_mb=FORTY_GB)
    task = make_task(tenant=tenant, gpu_required=1, cpu_cores=4, memory_mb=24 * 1024)

    outcome = bind_task(_info(task), build_snapshot().node(node.id), [1], config=SchedulerConfig())

    assert outcome.code == reasons.SCHEDULED


def test_one_cycle_never_places_two_tasks_that_together_overfill_a_node(tenant):
    """Two 40 GB tasks decided in the same cycle: one lands on the 64 GB node, the other waits with the code."""
    node = make_node(cards=8, cpu_cores=64, memory_gb=64)
    first, second = (make_task(tenant=tenant, gpu_required=1, memory_mb=FORTY_GB) for _ in range(2))

    run_cycle()

    placed = Task.objects.filter(id__in=[first.id, second.id], status=lifecycle.SCHEDULED)
    assert [task.node_id for task in placed] == [node.id]
    waiting = Task.objects.get(id__in=[first.id, second.id], status=lifecycle.PENDING)
    attempt = SchedulingAttempt.objects.get(task=waiting)
    assert attempt.code == reasons.INSUFFICIENT_HOST_RESOURCES
    assert INSUFFICIENT_HOST in attempt.message
    # Nothing was refused at bind: the snapshot already knew.
    assert "Bind refused" not in attempt.message


def test_a_waiting_task_lands_once_the_booked_memory_is_returned(tenant):
    node = make_node(cards=8, cpu_cores=64, memory_gb=64)
    holder = make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=[0], gpu_required=1,
                       memory_mb=FORTY_GB)
    waiting = make_task(tenant=tenant, gpu_required=1, memory_mb=FORTY_GB)
    run_cycle()
    assert Task.objects.get(id=waiting.id).status == lifecycle.PENDING

    Task.objects.filter(id=holder.id).update(status=lifecycle.SUCCEEDED)
    end_backoffs()
    run_cycle()
    assert Task.objects.get(id=waiting.id).node_id == node.id


def test_audit_ledgers_recounts_the_host_resources_of_each_node(tenant):
    node = make_node(cards=4, cpu_cores=8, memory_gb=64, name="overbooked")
    for index in (0, 1):  # written around bind, as a bug or a manual edit would
        make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=[index], gpu_required=1, cpu_cores=5,
                  memory_mb=FORTY_GB)

    entry = next(entry for entry in ledger_audit().nodes if entry.node_id == node.id)
    assert (entry.cpu_booked, entry.cpu_cores, entry.memory_booked_mb, entry.memory_mb) == (10, 8, 2 * FORTY_GB,
                                                                                              64 * 1024)
    assert entry.host_overbooked
    out = StringIO()
    with pytest.raises(SystemExit):  # the gpu_used ledger of the rows written around bind is wrong too
        call_command("audit_ledgers", stdout=out)
    assert f"node overbooked: active tasks book 10 of 8 CPU cores and {2 * FORTY_GB} of {64 * 1024} MB" in out.getvalue()
