"""Attempts written behind (scheduling.diagnostics.attempts): a cycle hands its batch to the writer's own session and
returns; the batch lands after, never over a later attempt, and never where the writer could not see the tasks."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.diagnostics.attempts import AttemptBatch, attempts_writer
from scheduling.models import AttemptCodeCount, SchedulingAttempt, Task
from tests.factories import make_node, make_task

ATTEMPTS = SchedulingAttempt._meta.db_table


class _AttemptsLocked:
    """Another session holds the attempts table against writes until `release`."""

    def __init__(self) -> None:
        self.locked, self.released = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold)

    def __enter__(self):
        self.thread.start()
        assert self.locked.wait(30)
        return self

    def release(self) -> None:
        self.released.set()
        self.thread.join(30)

    def __exit__(self, *exc) -> None:
        self.release()

    def _hold(self) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute(f"LOCK TABLE {ATTEMPTS} IN SHARE ROW EXCLUSIVE MODE")
                self.locked.set()
                self.released.wait(60)
                cursor.execute("COMMIT")
        finally:
            connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_a_cycle_writing_behind_returns_before_its_attempts_land_and_they_land_after(tenant):
    make_node(cards=1)
    # One card for two tasks: the first binds, the second waits.
    bound, unfit = make_task(tenant=tenant, gpu_required=1), make_task(tenant=tenant, gpu_required=1)
    finished = []

    with _AttemptsLocked() as lock:
        cycle = threading.Thread(target=lambda: (finished.append(run_cycle(attempts_behind=True)),
                                                 connections.close_all()))
        cycle.start()
        cycle.join(30)
        # The cycle bound its task and returned while its attempts could not be written yet.
        assert [result.bound for result in finished] == [1]
        assert Task.objects.get(id=bound.id).status == lifecycle.SCHEDULED
        assert not SchedulingAttempt.objects.exists()
        lock.release()
        attempts_writer.wait()

    assert dict(SchedulingAttempt.objects.values_list("task_id", "code")) == {
        bound.id: "Scheduled", unfit.id: "InsufficientResources"}
    assert dict(AttemptCodeCount.objects.values_list("code", "count")) == {"Scheduled": 1, "InsufficientResources": 1}


@pytest.mark.django_db
def test_inside_a_transaction_the_attempts_are_written_at_once_on_the_cycles_own_session(tenant):
    # A test's transaction, as any caller's, holds rows the writer's session cannot see.
    make_node(cards=1)
    task = make_task(tenant=tenant, gpu_required=1)

    run_cycle(attempts_behind=True)

    assert SchedulingAttempt.objects.get(task=task).code == "Scheduled"


@pytest.mark.django_db
def test_an_attempt_never_replaces_a_later_one_of_the_same_task(tenant):
    task = make_task(tenant=tenant)
    later, earlier = timezone.now(), timezone.now() - timedelta(seconds=1)
    for code, at in (("Scheduled", later), ("InsufficientResources", earlier)):
        batch = AttemptBatch()
        batch.add(task.id, code, f"{code} attempt")
        batch.flush(now=at)

    attempt = SchedulingAttempt.objects.get(task=task)
    assert (attempt.code, attempt.at) == ("Scheduled", later)
    # Counted all the same: it was an attempt.
    assert dict(AttemptCodeCount.objects.values_list("code", "count")) == {"Scheduled": 1, "InsufficientResources": 1}


@pytest.mark.django_db(transaction=True)
def test_a_batch_the_writer_fails_to_write_is_logged_and_the_next_one_is_written(tenant, caplog):
    task = make_task(tenant=tenant)
    attempts_writer.submit("not a JSON document", [], [], timezone.now())
    attempts_writer.wait()
    assert "writing a batch of scheduling attempts failed" in caplog.text

    batch = AttemptBatch()
    batch.add(task.id, "NoSchedulableNodes", "0/0 nodes are available.")
    batch.flush(behind=True)
    attempts_writer.wait()

    assert SchedulingAttempt.objects.get(task=task).code == "NoSchedulableNodes"
