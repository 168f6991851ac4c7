"""Retention (design §17.4): finished tasks past the horizon go with their attempts, timeline and logs, in
batches; usage stays; each tenant's logs stay within its budget, oldest finished tasks' first."""

from datetime import date, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Sum
from django.db.models.functions import Length
from django.utils import timezone

from scheduling import lifecycle
from scheduling.housekeeping.retention import apply_retention, cap_tenant_logs, delete_expired_tasks
from scheduling.models import (SchedulingAttempt, Task, TaskEvent, TaskGroup, TaskLog, TaskLogChunk,
                               UsageRecord)
from scheduling.services import task_logs
from scheduling.services.log_reading import task_log_slice
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db


def _finished(tenant, *, days_ago: float, status=lifecycle.SUCCEEDED, **fields) -> Task:
    task = make_task(tenant=tenant, status=status, finished_at=timezone.now() - timedelta(days=days_ago), **fields)
    TaskEvent.objects.create(task=task, from_status="running", to_status=status)
    SchedulingAttempt.objects.create(task=task, code="Scheduled")
    return task


def _log(task, node, data: bytes) -> None:
    task_logs.task_log_append(node=node, task_id=task.id, data=data)


def test_finished_tasks_past_retention_go_with_everything_of_theirs_and_nothing_else(settings, tenant):
    settings.HETEROFLOW_TASK_RETENTION_DAYS = 30
    node = make_node()
    expired = [_finished(tenant, days_ago=31, node=node), _finished(tenant, days_ago=45, status=lifecycle.FAILED,
                                                                    node=node)]
    for task in expired:
        _log(task, node, b"old output\n")
    recent = _finished(tenant, days_ago=29)
    long_running = make_task(tenant=tenant, status=lifecycle.RUNNING, started_at=timezone.now() - timedelta(days=90))
    long_pending = make_task(tenant=tenant)
    Task.objects.filter(id=long_pending.id).update(created_at=timezone.now() - timedelta(days=90))
    usage = UsageRecord.objects.create(tenant=tenant, day=date.today() - timedelta(days=40), gpu_type="nvidia",
                                       task_type="batch", card_seconds=3600)

    out = StringIO()
    call_command("run_loops", "--once", "--only", "retention", stdout=out)

    assert "2 finished task(s)" in out.getvalue()
    assert set(Task.objects.values_list("id", flat=True)) == {recent.id, long_running.id, long_pending.id}
    expired_ids = [task.id for task in expired]
    for model in (TaskEvent, SchedulingAttempt, TaskLog, TaskLogChunk):
        assert not model.objects.filter(task_id__in=expired_ids).exists(), model
    assert TaskEvent.objects.filter(task=recent).exists()
    assert list(UsageRecord.objects.values_list("id", "card_seconds")) == [(usage.id, 3600.0)]


def test_it_works_in_batches_and_takes_ended_groups_left_empty(settings, tenant):
    settings.HETEROFLOW_TASK_RETENTION_DAYS = 30
    old = timezone.now() - timedelta(days=60)
    ended = TaskGroup.objects.create(tenant=tenant, name="ended", type="training", status="succeeded")
    running = TaskGroup.objects.create(tenant=tenant, name="serving", type="inference", status="running")
    TaskGroup.objects.filter(id__in=[ended.id, running.id]).update(created_at=old)
    for group in (ended, running):
        for _ in range(3):
            _finished(tenant, days_ago=40, group=group)
    live_replica = make_task(tenant=tenant, group=running, status=lifecycle.RUNNING)

    assert delete_expired_tasks(batch=2) == (6, 1)

    assert set(TaskGroup.objects.values_list("id", flat=True)) == {running.id}
    assert list(Task.objects.values_list("id", flat=True)) == [live_replica.id]


def test_over_its_log_budget_a_tenant_loses_its_oldest_finished_tasks_logs_first(settings, tenant, other_tenant):
    settings.HETEROFLOW_TENANT_LOG_BYTES = 250
    node = make_node()
    oldest, older, newest = (_finished(tenant, days_ago=days, node=node) for days in (3, 2, 1))
    running = make_task(tenant=tenant, status=lifecycle.RUNNING, node=node)
    theirs = _finished(other_tenant, days_ago=5, node=node)
    for task in (oldest, older, newest, running, theirs):
        _log(task, node, b"x" * 100)

    assert cap_tenant_logs() == (2, 200)

    kept = {task.id: task_log_slice(task_id=task.id) for task in (oldest, older, newest, running, theirs)}
    assert [len(kept[task.id].text) for task in (oldest, older, newest, running, theirs)] == [0, 0, 100, 100, 100]
    # A follower reading on from where it was finds the bytes said dropped, not silently gone.
    assert (kept[oldest.id].dropped_bytes, kept[oldest.id].end_offset) == (100, 100)
    assert cap_tenant_logs() == (0, 0)


def test_a_tenant_printing_without_end_stays_within_its_log_budget(settings, monkeypatch, tenant):
    """A tenant whose tasks print forever, one after another: after each retention run, its logs take no more
    of the database than its budget (the running task's own log bounded by the per-task cap)."""
    budget, per_task = 256 * 1024, 64 * 1024
    settings.HETEROFLOW_TENANT_LOG_BYTES = budget
    monkeypatch.setattr(task_logs, "TASK_LOG_MAX_BYTES", per_task)
    node = make_node()
    batch = b"y" * (16 * 1024)
    stored = []
    for wave in range(12):
        task = make_task(tenant=tenant, status=lifecycle.RUNNING, node=node)
        for _ in range(10):
            _log(task, node, batch)
        Task.objects.filter(id=task.id).update(status=lifecycle.SUCCEEDED,
                                               finished_at=timezone.now() + timedelta(seconds=wave))
        apply_retention()
        stored.append(TaskLogChunk.objects.filter(task__tenant=tenant).aggregate(
            total=Sum(Length("content")))["total"])

    # Without the budget the tenant would keep 12 × 64 KiB; with it, never more than the budget.
    assert max(stored) <= budget
    assert stored[-1] >= budget - per_task
