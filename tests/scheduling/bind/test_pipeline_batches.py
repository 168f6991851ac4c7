"""Batched bind (`bind_batch`) against PostgreSQL: many placements in one transaction, each re-checked live, a refused
one left out without touching the others, and races with other instances settled by the per-row CAS."""

import random
import threading
import time

import pytest
from django.db import connection, transaction
from django.db.models import F, Sum

from nodes.models import Node
from scheduling import lifecycle
from scheduling.bind import Placement, bind_batch
from scheduling.bind import pipeline
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, task_info_from_row
from scheduling.cycle.run import run_cycle
from scheduling.framework import reasons
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.models import SchedulingAttempt, Task, TaskEvent, TaskType
from scheduling.signals import task_transitioned
from tenants.models import Tenant
from tests.factories import make_node, make_task
from tests.scheduling.bind.single import bind_task

pytestmark = pytest.mark.django_db


def _info(task):
    return task_info_from_row(Task.objects.filter(id=task.id).values_list(*TASK_INFO_FIELDS).get())


def _placement(task, node, cards):
    return Placement(_info(task), build_snapshot().node(node.id), cards)


def _ledger_matches_active_tasks(node):
    node.refresh_from_db()
    active = Task.objects.filter(node=node, status__in=lifecycle.ACTIVE_STATES).aggregate(total=Sum("gpu_required"))
    return node.gpu_used == (active["total"] or 0)


def test_a_batch_binds_every_placement_with_the_effects_of_task_transition(tenant, django_capture_on_commit_callbacks):
    first, second = make_node(cards=4), make_node(cards=2)
    tasks = [make_task(tenant=tenant, gpu_required=2), make_task(tenant=tenant, gpu_required=1),
             make_task(tenant=tenant, gpu_required=2)]
    placements = [_placement(tasks[0], first, [0, 1]), _placement(tasks[1], first, [2]),
                  _placement(tasks[2], second, [0, 1])]
    heard = []
    task_transitioned.connect(lambda sender, **kwargs: heard.append(kwargs), weak=False, dispatch_uid="t-batch")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            outcomes = bind_batch(placements, config=SchedulerConfig())
    finally:
        task_transitioned.disconnect(dispatch_uid="t-batch")

    assert [outcome.code for outcome in outcomes] == [reasons.SCHEDULED] * 3
    assert [outcome.cards for outcome in outcomes] == [(0, 1), (2,), (0, 1)]
    for task, node, cards in zip(tasks, [first, first, second], [[0, 1], [2], [0, 1]]):
        task.refresh_from_db()
        assert (task.status, task.node_id, task.gpus) == (lifecycle.SCHEDULED, node.id, cards)
        assert task.scheduled_at is not None and task.status_changed_at == task.scheduled_at
        event = TaskEvent.objects.get(task=task)
        assert (event.from_status, event.to_status, event.reason) == (lifecycle.PENDING, lifecycle.SCHEDULED,
                                                                      f"bound to {node.name}")
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.gpu_used, second.gpu_used) == (3, 2)
    assert sorted((h["task_id"], h["tenant_id"], h["to_status"]) for h in heard) == sorted(
        (task.id, tenant.id, lifecycle.SCHEDULED) for task in tasks
    )


def test_a_placement_failing_its_live_recheck_is_left_out_and_the_others_bind(tenant, other_tenant):
    full, roomy = make_node(cards=2), make_node(cards=4)
    placements_made_on_stale_snapshot = [
        make_task(tenant=tenant, gpu_required=1), make_task(tenant=tenant, gpu_required=2),
        make_task(tenant=tenant, gpu_required=1),
    ]
    first, refused, last = placements_made_on_stale_snapshot
    batch = [_placement(first, roomy, [0]), _placement(refused, full, [0, 1]), _placement(last, roomy, [1])]
    # Since the snapshot, another tenant's task took both cards of `full`.
    make_task(tenant=other_tenant, status=lifecycle.RUNNING, node=full, gpus=[0, 1], gpu_required=2)
    Node.objects.filter(id=full.id).update(gpu_used=F("gpu_used") + 2)

    outcomes = bind_batch(batch, config=SchedulerConfig())

    assert [outcome.code for outcome in outcomes] == [reasons.SCHEDULED, reasons.INSUFFICIENT_RESOURCES,
                                                      reasons.SCHEDULED]
    refused.refresh_from_db()
    assert (refused.status, refused.node_id, refused.gpus) == (lifecycle.PENDING, None, [])
    assert not TaskEvent.objects.filter(task=refused).exists()
    assert Task.objects.filter(id__in=[first.id, last.id], status=lifecycle.SCHEDULED, node=roomy).count() == 2
    assert _ledger_matches_active_tasks(full) and full.gpu_used == 2
    assert _ledger_matches_active_tasks(roomy) and roomy.gpu_used == 2


def test_later_placements_are_checked_against_the_earlier_ones_of_the_same_batch(tenant):
    node = make_node(cards=3)
    whole = [make_task(tenant=tenant, gpu_required=2) for _ in range(2)]
    inference = [make_task(tenant=tenant, gpu_required=0, type=TaskType.INFERENCE) for _ in range(2)]
    # The snapshot let both two-card tasks prefer the same cards; only one card is left after the first.
    batch = [_placement(whole[0], node, [0, 1]), _placement(whole[1], node, [0, 1]),
             _placement(inference[0], node, []), _placement(inference[1], node, [])]

    outcomes = bind_batch(batch, config=SchedulerConfig())

    assert [outcome.code for outcome in outcomes] == [reasons.SCHEDULED, reasons.INSUFFICIENT_RESOURCES,
                                                      reasons.SCHEDULED, reasons.SCHEDULED]
    assert outcomes[2].port != outcomes[3].port
    assert _ledger_matches_active_tasks(node) and node.gpu_used == 2


def test_the_chains_recheck_of_a_node_sees_what_the_batch_placed_there_before(tenant):
    node = make_node(cards=2, cpu_cores=16)
    tasks = [make_task(tenant=tenant, gpu_required=1, cpu_cores=10) for _ in range(2)]
    # The cards are distinct, but the node's cores book only one of the two.
    outcomes = bind_batch([_placement(tasks[0], node, [0]), _placement(tasks[1], node, [1])],
                          config=SchedulerConfig())

    assert [outcome.code for outcome in outcomes] == [reasons.SCHEDULED, reasons.INSUFFICIENT_HOST_RESOURCES]
    assert _ledger_matches_active_tasks(node) and node.gpu_used == 1


def test_a_tenant_quota_counts_the_batch_placements_before_it(tenant):
    Tenant.objects.filter(id=tenant.id).update(gpu_quota=3)
    node = make_node(cards=8)
    tasks = [make_task(tenant=tenant, gpu_required=2) for _ in range(2)]

    outcomes = bind_batch([_placement(tasks[0], node, [0, 1]), _placement(tasks[1], node, [2, 3])],
                          config=SchedulerConfig())

    assert [outcome.code for outcome in outcomes] == [reasons.SCHEDULED, reasons.QUOTA_EXCEEDED]
    assert "used 2 / quota 3, asked 2" in outcomes[1].message
    assert _ledger_matches_active_tasks(node) and node.gpu_used == 2


def test_a_task_another_instance_bound_first_is_a_conflict_and_moves_no_ledger(tenant):
    node, elsewhere = make_node(cards=4), make_node(cards=4)
    taken, free = make_task(tenant=tenant, gpu_required=2), make_task(tenant=tenant, gpu_required=1)
    batch = [_placement(taken, node, [0, 1]), _placement(free, node, [2])]
    assert bind_task(_info(taken), build_snapshot().node(elsewhere.id), [0, 1], config=SchedulerConfig()).bound

    outcomes = bind_batch(batch, config=SchedulerConfig())

    assert [outcome.code for outcome in outcomes] == [reasons.BIND_CONFLICT, reasons.SCHEDULED]
    assert TaskEvent.objects.filter(task=taken).count() == 1
    assert _ledger_matches_active_tasks(node) and node.gpu_used == 1
    assert _ledger_matches_active_tasks(elsewhere) and elsewhere.gpu_used == 2


def test_a_cycle_takes_back_a_refused_batch_placement_and_places_the_task_on_the_other_node(
    tenant, other_tenant, monkeypatch
):
    nodes = {node.id: node for node in (make_node(cards=2), make_node(cards=2))}
    task = make_task(tenant=tenant, gpu_required=1)
    batches = []

    def bind_batch_after_another_instance(placements, **kwargs):
        if not batches:
            # Another instance takes both cards of the chosen node between the snapshot and this commit.
            taken = placements[0].node.id
            make_task(tenant=other_tenant, status=lifecycle.RUNNING, node_id=taken, gpus=[0, 1], gpu_required=2)
            Node.objects.filter(id=taken).update(gpu_used=2)
        outcomes = bind_batch(placements, **kwargs)
        batches.append([(placement.node.id, outcome.code) for placement, outcome in zip(placements, outcomes)])
        return outcomes

    monkeypatch.setattr(pipeline, "bind_batch", bind_batch_after_another_instance)

    result = run_cycle(rng=random.Random(1))

    # The refused placement went back to the framework, which chose the other node for the next batch.
    [[(taken, code)], [(retried, retry_code)]] = batches
    assert code == reasons.INSUFFICIENT_RESOURCES
    assert retried != taken and retry_code == reasons.SCHEDULED
    assert (result.bound, result.failed) == (1, 0)
    task.refresh_from_db()
    assert task.node_id != taken and task.status == lifecycle.SCHEDULED
    attempt = SchedulingAttempt.objects.get(task=task)
    # The retry judged the refreshed snapshot: the taken node is no longer feasible.
    assert attempt.code == reasons.SCHEDULED and attempt.message.startswith("1/2")
    assert all(_ledger_matches_active_tasks(node) for node in nodes.values())


@pytest.mark.django_db(transaction=True)
def test_batches_racing_from_two_threads_never_bind_a_task_twice_and_keep_every_ledger_exact(tenant):
    nodes = [make_node(cards=16) for _ in range(4)]
    tasks = [make_task(tenant=tenant, gpu_required=1) for _ in range(24)]
    infos = [_info(task) for task in tasks]
    start = threading.Barrier(2)
    outcomes: dict[str, list] = {}

    def instance(name: str, order: list[int]) -> None:
        try:
            snapshot = build_snapshot()
            # Each instance spreads the same tasks over the nodes in its own order, one batch of all of them.
            placements = [Placement(infos[index], snapshot.node(nodes[(index + len(name)) % 4].id), [])
                          for index in order]
            start.wait()
            outcomes[name] = bind_batch(placements, config=SchedulerConfig())
        finally:
            connection.close()

    threads = [threading.Thread(target=instance, args=("a", list(range(24)))),
               threading.Thread(target=instance, args=("bb", list(reversed(range(24)))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    bound = [outcome for name in outcomes for outcome in outcomes[name] if outcome.bound]
    assert len(bound) == 24
    assert Task.objects.filter(status=lifecycle.SCHEDULED).count() == 24
    assert TaskEvent.objects.filter(to_status=lifecycle.SCHEDULED).count() == 24
    conflicts = [outcome for name in outcomes for outcome in outcomes[name] if outcome.conflict]
    assert len(conflicts) == 24
    for node in nodes:
        assert _ledger_matches_active_tasks(node)
        placed = Task.objects.filter(node=node).values_list("gpus", flat=True)
        cards = [card for gpus in placed for card in gpus]
        assert len(cards) == len(set(cards))


@pytest.mark.django_db(transaction=True)
def test_batches_claiming_the_same_tasks_on_different_nodes_in_opposite_orders_settle_without_deadlock(tenant):
    left, right = make_node(cards=16), make_node(cards=16)
    tasks = [make_task(tenant=tenant, gpu_required=1) for _ in range(12)]
    infos = [_info(task) for task in tasks]
    outcomes, errors = {}, []

    def instance(node, order):
        try:
            snapshot = build_snapshot()
            placements = [Placement(infos[index], snapshot.node(node.id), []) for index in order]
            outcomes[node.id] = bind_batch(placements, config=SchedulerConfig())
        except Exception as error:  # a deadlock would surface here
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=instance, args=(left, list(range(12)))),
               threading.Thread(target=instance, args=(right, list(reversed(range(12)))))]
    # A third transaction holds the middle task, so both batches reach it before either finishes: claiming in
    # their own orders, each would then hold tasks the other one waits for.
    with transaction.atomic():
        Task.objects.select_for_update().filter(id=tasks[6].id).get()
        for thread in threads:
            thread.start()
        for _ in range(1000):
            if _sessions_waiting_for_a_lock() == 2:
                break
            time.sleep(0.01)
    for thread in threads:
        thread.join()

    assert errors == []
    assert sum(outcome.bound for batch in outcomes.values() for outcome in batch) == 12
    assert TaskEvent.objects.filter(to_status=lifecycle.SCHEDULED).count() == 12
    assert _ledger_matches_active_tasks(left) and _ledger_matches_active_tasks(right)
    assert left.gpu_used + right.gpu_used == 12


def _sessions_waiting_for_a_lock() -> int:
    with connection.cursor() as cursor:
        # Activity statistics are a snapshot per transaction unless cleared.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock'")
        return cursor.fetchone()[0]
