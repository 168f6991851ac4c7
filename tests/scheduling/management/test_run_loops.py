"""`manage.py run_loops --once [--only NAME ...]` (design §15.7)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduling.models import Task
from scheduling.tickers import TICKERS
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db

NAMES = ["cycle", "liveness", "node-lost", "watchdog", "backlog", "timeouts", "inference-rebuild",
         "training-wakeup", "windows"]


def run_loops(*args: str) -> list[str]:
    out = StringIO()
    call_command("run_loops", *args, stdout=out)
    return out.getvalue().splitlines()


def test_every_ticker_of_the_spec_is_there():
    assert sorted(TICKERS) == sorted(NAMES)


def test_once_runs_every_ticker_and_says_what_each_did(tenant):
    make_node(cards=2)
    task = make_task(tenant=tenant, gpu_required=1)

    lines = run_loops("--once")

    assert [line.split(":")[0] for line in lines] == list(TICKERS)
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
