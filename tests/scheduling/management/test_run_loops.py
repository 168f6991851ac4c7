"""`manage.py run_loops --once [--only NAME ...]` (design §15.7) and the periodic jobs' one table."""

from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from heteroflow_site.celery import run_periodic_job
from scheduling.management.commands.run_loops import run_loops_jobs
from scheduling.models import CycleRecord, Task
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db

NAMES = ["cycle", "liveness", "node-lost", "watchdog", "drains", "backlog", "timeouts", "inference-rebuild",
         "rollouts", "autoscale", "training-wakeup", "windows", "plugin-state", "usage", "retention", "history"]


def run_loops(*args: str) -> list[str]:
    out = StringIO()
    call_command("run_loops", *args, stdout=out)
    return out.getvalue().splitlines()


def test_every_ticker_of_the_spec_is_there():
    assert sorted(run_loops_jobs()) == sorted(NAMES)


def test_beat_runs_every_job_of_the_table_under_its_name_and_period():
    schedule = settings.CELERY_BEAT_SCHEDULE
    assert list(schedule) == [job.name for job in settings.PERIODIC_JOBS]
    assert {name: (entry["args"], entry["schedule"]) for name, entry in schedule.items()} == {
        job.name: ((job.name,), job.period) for job in settings.PERIODIC_JOBS}
    assert set(run_loops_jobs()) < set(schedule)


def test_the_celery_task_runs_a_job_by_its_name(tenant):
    make_node(cards=2)
    make_task(tenant=tenant, gpu_required=1)

    assert run_periodic_job("cycle").startswith("considered=1 bound=1")
    assert CycleRecord.objects.count() == 1


def test_once_runs_every_ticker_and_says_what_each_did(tenant):
    make_node(cards=2)
    task = make_task(tenant=tenant, gpu_required=1)

    lines = run_loops("--once")

    assert [line.split(":")[0] for line in lines] == list(run_loops_jobs())
    assert lines[-1].startswith("cycle: considered=1 bound=1")
    assert Task.objects.get(id=task.id).status == "scheduled"


def test_only_runs_the_named_tickers_in_the_order_given(tenant):
    make_node(cards=2)
    task = make_task(tenant=tenant, gpu_required=1)

    lines = run_loops("--once", "--only", "timeouts", "watchdog")

    assert lines == ["timeouts: 0 overdue task(s) stopping", "watchdog: 0 unconfirmed preemption(s) settled"]
    assert Task.objects.get(id=task.id).status == "pending"


@pytest.mark.parametrize("args", [["--once", "--only", "gc"], ["--only", "cycle"]])
def test_an_unknown_name_or_a_missing_once_is_refused(args):
    with pytest.raises(CommandError):
        call_command("run_loops", *args, stdout=StringIO())
