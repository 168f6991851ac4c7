"""Usage records (design §17.4): card-seconds per tenant, day, GPU type and task type, counted once."""

import threading
from datetime import date, datetime, timezone as dt_timezone

import pytest
from django.db import connection
from django.utils import timezone

from scheduling import lifecycle
from scheduling.models import Task, UsageRecord
from scheduling.services.task_transition import task_transition
from scheduling.usage.records import record_day_turn, record_placement_end
from tests.factories import make_node, make_task

DAY1_2300 = datetime(2026, 3, 1, 23, 0, tzinfo=dt_timezone.utc)
DAY2_0130 = datetime(2026, 3, 2, 1, 30, tzinfo=dt_timezone.utc)
DAY3_0600 = datetime(2026, 3, 3, 6, 0, tzinfo=dt_timezone.utc)


def _usage() -> dict[tuple[date, str, str], float]:
    return {(row.day, row.gpu_type, row.task_type): round(row.card_seconds, 3) for row in UsageRecord.objects.all()}


def _running(tenant, **fields) -> Task:
    node = fields.pop("node", None) or make_node(cards=8, memory_mb=81920)
    fields.setdefault("gpu_required", 2)
    node.gpu_used += fields["gpu_required"]
    node.save(update_fields=["gpu_used"])
    return make_task(tenant=tenant, gpu_type="nvidia", card_type="nvidia", status=lifecycle.RUNNING, node=node,
                     started_at=DAY1_2300, **fields)


def _at(monkeypatch, moment: datetime) -> None:
    monkeypatch.setattr(timezone, "now", lambda: moment)


@pytest.mark.django_db
def test_a_placement_over_midnight_is_split_across_the_two_days(monkeypatch, tenant):
    task = _running(tenant, gpus=[0, 1])
    _at(monkeypatch, DAY2_0130)

    assert task_transition(task.id, lifecycle.RUNNING, lifecycle.SUCCEEDED)

    assert _usage() == {(date(2026, 3, 1), "nvidia", "batch"): 2 * 3600.0,
                        (date(2026, 3, 2), "nvidia", "batch"): 2 * 5400.0}
    assert UsageRecord.objects.get(day=date(2026, 3, 1)).tenant_id == tenant.id


@pytest.mark.django_db
def test_a_fractional_task_counts_its_share_of_the_card(monkeypatch, tenant):
    task = _running(tenant, gpu_required=0, gpu_memory_mb=20480, shard={"card": 0}, type="inference")
    _at(monkeypatch, datetime(2026, 3, 1, 23, 59, tzinfo=dt_timezone.utc))

    assert task_transition(task.id, lifecycle.RUNNING, lifecycle.STOPPING)
    assert task_transition(task.id, lifecycle.STOPPING, lifecycle.STOPPED)

    # A quarter of an 80 GiB card for 59 minutes; the placement ended when the cards were freed, not at stopping.
    assert _usage() == {(date(2026, 3, 1), "nvidia", "inference"): 0.25 * 59 * 60}


@pytest.mark.django_db
def test_a_replayed_transition_and_a_second_ticker_run_count_nothing_again(monkeypatch, tenant):
    task = _running(tenant)
    _at(monkeypatch, DAY3_0600)

    assert record_day_turn() == 1
    record_day_turn()
    after_ticks = _usage()
    assert after_ticks == {(date(2026, 3, 1), "nvidia", "batch"): 2 * 3600.0,
                           (date(2026, 3, 2), "nvidia", "batch"): 2 * 86400.0}

    assert task_transition(task.id, lifecycle.RUNNING, lifecycle.FAILED)
    assert not task_transition(task.id, lifecycle.RUNNING, lifecycle.FAILED)
    record_placement_end(task_id=task.id, ended_at=DAY3_0600)
    record_day_turn()

    assert _usage() == {**after_ticks, (date(2026, 3, 3), "nvidia", "batch"): 2 * 6 * 3600.0}


@pytest.mark.django_db
def test_a_task_that_runs_again_after_a_preemption_adds_its_second_placement(monkeypatch, tenant):
    task = _running(tenant)
    _at(monkeypatch, datetime(2026, 3, 1, 23, 30, tzinfo=dt_timezone.utc))
    task_transition(task.id, lifecycle.RUNNING, lifecycle.PREEMPTING)
    task_transition(task.id, lifecycle.PREEMPTING, lifecycle.PENDING)
    Task.objects.filter(id=task.id).update(status=lifecycle.RUNNING, node=make_node(gpu_used=2),
                                           started_at=datetime(2026, 3, 1, 23, 50, tzinfo=dt_timezone.utc))
    _at(monkeypatch, datetime(2026, 3, 1, 23, 55, tzinfo=dt_timezone.utc))

    task_transition(task.id, lifecycle.RUNNING, lifecycle.SUCCEEDED)

    assert _usage() == {(date(2026, 3, 1), "nvidia", "batch"): 2 * (30 + 5) * 60.0}


@pytest.mark.django_db(transaction=True)
def test_two_tickers_at_once_count_each_placement_once(tenant):
    node = make_node(cards=8)
    for _ in range(40):
        _running(tenant, node=node, gpu_required=1)
    now = datetime(2026, 3, 2, 12, 0, tzinfo=dt_timezone.utc)
    barrier = threading.Barrier(2)

    def tick():
        try:
            barrier.wait()
            record_day_turn(now=now, batch=7)
        finally:
            connection.close()

    threads = [threading.Thread(target=tick) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert _usage() == {(date(2026, 3, 1), "nvidia", "batch"): 40 * 3600.0}
