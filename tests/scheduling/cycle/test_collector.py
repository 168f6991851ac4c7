"""The collector around a cycle (`scheduling.cycle.collector`): no collection while a cycle runs, startup frozen by
the first cycle of the process, the collector left as it was found."""

import gc
import sys

import pytest

from scheduling import lifecycle
from scheduling.cycle import collector
from scheduling.cycle.run import run_cycle
from scheduling.models import Task
from tests.factories import make_node, make_task


def _placing() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "place" and frame.f_code.co_filename.endswith("cycle/run.py"):
            return True
        frame = frame.f_back
    return False


@pytest.fixture
def collections():
    """The generations of the collections the garbage collector runs while a cycle places tasks."""
    seen: list[int] = []

    def count(phase, info):
        if phase == "start" and _placing():
            seen.append(info["generation"])

    gc.callbacks.append(count)
    yield seen
    gc.callbacks.remove(count)


@pytest.mark.django_db
def test_no_collection_runs_while_a_cycle_places_many_tasks(tenant, collections):
    for _ in range(4):
        make_node(cards=8)
    tasks = [make_task(tenant=tenant, gpu_required=1) for _ in range(20)]
    gc.collect()
    collections.clear()

    result = run_cycle()

    assert result.bound == len(tasks)
    assert collections == []
    assert gc.isenabled()
    assert set(Task.objects.filter(id__in=[task.id for task in tasks]).values_list("status", flat=True)) == {
        lifecycle.SCHEDULED}


def test_the_first_cycle_of_a_process_freezes_what_startup_made(monkeypatch):
    monkeypatch.setattr(collector, "_startup_frozen", False)
    gc.unfreeze()

    with collector.collector_paused():
        assert not gc.isenabled()
    frozen = gc.get_freeze_count()
    made_since = [{} for _ in range(1000)]
    with collector.collector_paused():
        pass

    assert frozen > 10_000
    # Frozen once: a later cycle neither thaws startup nor freezes what was made since (frozen objects that lose
    # their last reference are still freed, so the count may fall a little).
    assert frozen * 0.9 < gc.get_freeze_count() < frozen + len(made_since) / 2
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    try:
        with collector.collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.django_db
def test_a_scheduler_process_freezes_startup_before_its_first_cycle(monkeypatch):
    """Not inside the first cycle: its one full collection (~80 ms) delayed the first tasks of every scheduler."""
    from django.core.management import call_command

    from scheduling.management.commands import run_scheduler

    class Stop(BaseException):
        pass

    frozen_at_first_cycle = []

    def first_cycle(**kwargs):
        frozen_at_first_cycle.append(collector._startup_frozen)
        raise Stop

    monkeypatch.setattr(collector, "_startup_frozen", False)
    monkeypatch.setattr(run_scheduler, "run_cycle", first_cycle)
    with pytest.raises(Stop):
        call_command("run_scheduler")
    assert frozen_at_first_cycle == [True]


def test_a_celery_worker_process_freezes_startup_when_it_starts(monkeypatch):
    from celery.signals import worker_process_init

    monkeypatch.setattr(collector, "_startup_frozen", False)
    worker_process_init.send(sender=None)
    assert collector._startup_frozen
