import threading

import pytest
from django.db import connection, connections

from scheduling import lifecycle
from scheduling.lifecycle import ACTIVE_STATES, TRANSITIONS, IllegalTransition
from scheduling.models import Task, TaskEvent
from scheduling.services import task_transition as transition_module
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task

ALL_STATES = [choice for choice, _ in Task._meta.get_field("status").choices]


@pytest.mark.django_db
@pytest.mark.parametrize("from_status,to_status", sorted(TRANSITIONS))
def test_every_legal_transition_wins_once_and_is_recorded(tenant, from_status, to_status):
    task = make_task(tenant=tenant, status=from_status)

    assert task_transition(task.id, from_status, to_status, reason="test") is True
    assert task_transition(task.id, from_status, to_status) is False

    task.refresh_from_db()
    assert task.status == to_status
    assert TaskEvent.objects.filter(task=task, from_status=from_status, to_status=to_status).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "from_status,to_status",
    [(a, b) for a in ALL_STATES for b in ALL_STATES if (a, b) not in TRANSITIONS],
)
def test_every_illegal_transition_is_refused_naming_both_states(tenant, from_status, to_status):
    task = make_task(tenant=tenant, status=from_status)

    with pytest.raises(IllegalTransition) as refused:
        task_transition(task.id, from_status, to_status)

    assert from_status in str(refused.value) and to_status in str(refused.value)
    task.refresh_from_db()
    assert task.status == from_status


def test_a_task_under_preemption_is_never_marked_succeeded():
    """design §16.1: `preempting → succeeded` is illegal again; a victim that crashed may still fail."""
    assert (lifecycle.PREEMPTING, lifecycle.FAILED) in TRANSITIONS
    for illegal in (lifecycle.SUCCEEDED, lifecycle.STOPPED):
        with pytest.raises(IllegalTransition):
            lifecycle.check_transition(lifecycle.PREEMPTING, illegal)


def test_active_states_are_the_four_of_the_spec():
    assert ACTIVE_STATES == {"scheduled", "running", "preempting", "stopping"}


@pytest.mark.django_db
def test_cas_loses_when_the_status_moved_meanwhile(tenant):
    task = make_task(tenant=tenant, status=lifecycle.RUNNING)

    assert task_transition(task.id, lifecycle.SCHEDULED, lifecycle.RUNNING) is False

    task.refresh_from_db()
    assert task.status == lifecycle.RUNNING
    assert not TaskEvent.objects.filter(task=task).exists()


@pytest.mark.django_db
def test_ledger_moves_when_entering_and_leaving_the_active_states(tenant):
    node = make_node(cards=8)
    task = make_task(tenant=tenant, gpu_required=4)

    task_transition(task.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=node, gpus=[0, 1, 2, 3])
    node.refresh_from_db()
    assert node.gpu_used == 4

    task_transition(task.id, lifecycle.SCHEDULED, lifecycle.RUNNING)
    node.refresh_from_db()
    assert node.gpu_used == 4

    task_transition(task.id, lifecycle.RUNNING, lifecycle.SUCCEEDED)
    node.refresh_from_db()
    task.refresh_from_db()
    assert node.gpu_used == 0
    assert task.node_id == node.id, "a finished task keeps its placement as history"


@pytest.mark.django_db
def test_returning_to_pending_releases_the_placement(tenant):
    node = make_node(cards=8)
    task = make_task(tenant=tenant, gpu_required=2)
    task_transition(task.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=node, gpus=[0, 1], port=8000,
                    shard={"card": 0})

    task_transition(task.id, lifecycle.SCHEDULED, lifecycle.PENDING, reason="bind rollback")

    task.refresh_from_db()
    node.refresh_from_db()
    assert (task.node_id, task.gpus, task.port, task.shard) == (None, [], None, None)
    assert node.gpu_used == 0


@pytest.mark.django_db
def test_a_failing_side_effect_leaves_the_status_and_ledger_unchanged(tenant, monkeypatch):
    node = make_node(cards=8)
    task = make_task(tenant=tenant, gpu_required=2)

    def broken_event_write(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(transition_module.TaskEvent.objects, "create", broken_event_write)

    with pytest.raises(RuntimeError):
        task_transition(task.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=node, gpus=[0, 1])

    task.refresh_from_db()
    node.refresh_from_db()
    assert task.status == lifecycle.PENDING
    assert task.node_id is None
    assert node.gpu_used == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_cas_has_exactly_one_winner_each_time(tenant):
    rounds = 200
    tasks = [make_task(tenant=tenant, status=lifecycle.SCHEDULED) for _ in range(rounds)]
    barrier = threading.Barrier(2)
    wins: dict[int, list[bool]] = {task.id: [] for task in tasks}
    lock = threading.Lock()

    def racer():
        try:
            for task in tasks:
                barrier.wait()
                won = task_transition(task.id, lifecycle.SCHEDULED, lifecycle.RUNNING)
                with lock:
                    wins[task.id].append(won)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=racer) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert all(sorted(results) == [False, True] for results in wins.values())
    assert Task.objects.filter(status=lifecycle.RUNNING).count() == rounds
    assert TaskEvent.objects.filter(to_status=lifecycle.RUNNING).count() == rounds
    assert connection.vendor == "postgresql"


@pytest.mark.django_db
def test_the_placements_reason_does_not_outlive_the_task_but_a_stops_reason_does(tenant):
    node = make_node(cards=2)
    done, stopped = make_task(tenant=tenant, gpu_required=1), make_task(tenant=tenant, gpu_required=1)
    for task, card in ((done, 0), (stopped, 1)):
        assert task_transition(task.id, lifecycle.PENDING, lifecycle.SCHEDULED, reason=f"bound to {node.name}",
                               node=node, gpus=[card])
        assert task_transition(task.id, lifecycle.SCHEDULED, lifecycle.RUNNING)
    assert task_transition(done.id, lifecycle.RUNNING, lifecycle.SUCCEEDED)
    assert task_transition(stopped.id, lifecycle.RUNNING, lifecycle.STOPPING, reason="stopped by user")
    assert task_transition(stopped.id, lifecycle.STOPPING, lifecycle.STOPPED)
    done.refresh_from_db()
    stopped.refresh_from_db()
    assert (done.reason, stopped.reason) == ("", "stopped by user")
