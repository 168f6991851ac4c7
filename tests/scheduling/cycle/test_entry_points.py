"""The ways a cycle is started: the management command and the periodic jobs."""

import io

import pytest
from django.core.management import call_command

from scheduling import lifecycle
from scheduling.models import CycleRecord, Task
from heteroflow_site.celery import run_periodic_job
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db


def test_run_scheduler_once_runs_one_cycle_and_prints_its_figures(tenant):
    make_node(cards=1)
    task = make_task(tenant=tenant, gpu_required=1)
    out = io.StringIO()

    call_command("run_scheduler", "--once", stdout=out)

    assert Task.objects.get(id=task.id).status == lifecycle.SCHEDULED
    assert "considered=1 bound=1 failed=0 preempting=0" in out.getvalue()


def test_the_celery_ticker_task_runs_a_cycle(tenant):
    make_node(cards=1)
    make_task(tenant=tenant, gpu_required=1)

    figures = run_periodic_job("cycle")

    assert figures.startswith("considered=1 bound=1 ")
    assert CycleRecord.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_submitted_task_starts_a_cycle_at_once_and_an_empty_queue_runs_none(tenant):
    from scheduling.services.task_create import task_create

    make_node(cards=1)
    assert run_periodic_job("immediate-cycle") == "nothing waiting: no cycle"
    assert not CycleRecord.objects.exists()

    task = task_create(tenant=tenant, name="urgent", gpu_required=1)
    figures = run_periodic_job("immediate-cycle")

    assert " bound=1 " in figures
    assert Task.objects.get(id=task.id).status == lifecycle.SCHEDULED


def test_the_scheduler_loop_wakes_early_for_new_tasks(monkeypatch):
    from scheduling.management.commands import run_scheduler

    monkeypatch.setattr(run_scheduler.immediate_queue, "work_waiting", lambda: True)
    sleeps = []
    monkeypatch.setattr(run_scheduler.time, "sleep", sleeps.append)

    run_scheduler._wait_for_tick_or_new_tasks(run_scheduler.time.monotonic() + 5)

    assert sleeps == []
