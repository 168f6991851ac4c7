"""The queue's order (design §15.1): priority, then creation time, then id — single tasks and gangs alike, a gang
by its highest member priority; parked work is not taken."""

from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction
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


@pytest.fixture
def plans_told():
    """The plan of every statement this session runs from here on, as PostgreSQL's auto_explain tells it (a notice
    to the client); skipped where the server has no auto_explain."""
    with connection.cursor() as cursor:
        try:
            with transaction.atomic():
                cursor.execute("LOAD 'auto_explain'")
        except DatabaseError:
            pytest.skip("the server has no auto_explain")
        cursor.execute("SET LOCAL auto_explain.log_min_duration = 0")
        cursor.execute("SET LOCAL auto_explain.log_level = notice")
    told: list[str] = []

    def tell(notice) -> None:
        told.append(notice.message_primary)

    connection.connection.add_notice_handler(tell)
    yield told
    connection.connection.remove_notice_handler(tell)


def without_statistics(model) -> None:
    """The table as after a bulk load, never analysed: no column statistics, no row count (rolled back with the
    test)."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM pg_statistic WHERE starelid = %s::regclass", [model._meta.db_table])
        cursor.execute("UPDATE pg_class SET reltuples = -1 WHERE oid = %s::regclass", [model._meta.db_table])


def test_the_queue_is_read_along_its_index_though_the_table_was_never_analysed(tenant, plans_told):
    """Planned by the statistics alone, the read of a table never analysed is a bitmap scan of every pending task and
    a sort: its cost grows with the queue, not with the entries taken."""
    Task.objects.bulk_create([Task(tenant=tenant, name=f"queued-{serial}", priority=serial % 7)
                              for serial in range(2_000)])
    without_statistics(Task)

    entries = take_active(50)

    assert len(entries) == 50
    (plan,) = [told for told in plans_told if "ORDER BY t.priority DESC, t.created_at, t.id" in told]
    assert "Index Scan using task_queue_order on scheduling_task t " in plan
    assert "Bitmap Heap Scan on scheduling_task t " not in plan
