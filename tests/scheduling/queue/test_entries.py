"""The queue's order (design §15.1): priority, then creation time, then id — single tasks and gangs alike, a gang
by its highest member priority; parked work is not taken."""

from datetime import timedelta

from django.utils import timezone

from scheduling.models import Task, TaskGroup
from scheduling.queue.entries import GANG, TASK, take_active
from tests.factories import make_task
from tests.scheduling.groups.test_gang import training_group


def test_tasks_and_gangs_share_one_order_and_a_gang_ranks_by_its_highest_member(tenant):
    low = make_task(tenant=tenant, priority=10)
    gang = training_group(tenant, world_size=2)
    Task.objects.filter(group=gang, rank=1).update(priority=80)
    high = make_task(tenant=tenant, priority=90)
    same_but_older = make_task(tenant=tenant, priority=80)
    Task.objects.filter(id=same_but_older.id).update(created_at=timezone.now() - timedelta(hours=1))

    entries = take_active(10)

    assert [(entry.kind, entry.id) for entry in entries] == [
        (TASK, high.id), (TASK, same_but_older.id), (GANG, gang.id), (TASK, low.id),
    ]
    assert entries[2].priority == 80


def test_parked_tasks_and_gangs_are_not_taken_until_their_backoff_runs_out(tenant):
    parked = make_task(tenant=tenant)
    due = make_task(tenant=tenant)
    gang = training_group(tenant, world_size=2)
    later = timezone.now() + timedelta(minutes=1)
    Task.objects.filter(id=parked.id).update(parked_until=later)
    Task.objects.filter(id=due.id).update(parked_until=timezone.now() - timedelta(seconds=1))
    Task.objects.filter(group=gang).update(parked_until=later)

    assert [(entry.kind, entry.id) for entry in take_active(10)] == [(TASK, due.id)]


def test_the_limit_counts_entries_and_stopped_gangs_are_left_out(tenant):
    tasks = [make_task(tenant=tenant, priority=50) for _ in range(3)]
    stopped = training_group(tenant, world_size=2, name="stopped")
    TaskGroup.objects.filter(id=stopped.id).update(status=TaskGroup.Status.STOPPED)

    assert [entry.id for entry in take_active(2)] == [task.id for task in tasks[:2]]
    assert all(entry.kind == TASK for entry in take_active(10))
