"""Bind (design §5) against PostgreSQL: the claim, the live re-checks, and all-or-nothing rollback."""

import random

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from nodes.models import GPU, Node
from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.framework import reasons
from scheduling.framework.snapshot import SchedulerConfig, TenancyView
from scheduling.models import SchedulingAttempt, Task, TaskEvent, TaskType
from scheduling.signals import task_transitioned
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, task_info_from_row
from tests.factories import make_node, make_task
from tests.scheduling.bind.single import bind_task

pytestmark = pytest.mark.django_db


def _info(task):
    return task_info_from_row(Task.objects.filter(id=task.id).values_list(*TASK_INFO_FIELDS).get())


def _node_info(node):
    return build_snapshot().node(node.id)


def _occupy(node, tenant, cards, **fields):
    """An active task already holding `cards` of `node`, with the node's ledger to match."""
    task = make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=cards, gpu_required=len(cards),
                     **fields)
    Node.objects.filter(id=node.id).update(gpu_used=F("gpu_used") + len(cards))
    return task


def _unchanged(task, node, gpu_used):
    task.refresh_from_db()
    node.refresh_from_db()
    assert (task.status, task.node_id, task.gpus, task.port, task.shard) == (lifecycle.PENDING, None, [], None, None)
    assert node.gpu_used == gpu_used
    assert not TaskEvent.objects.filter(task=task).exists()


def test_bind_claims_the_task_moves_the_ledger_and_writes_the_timeline_like_task_transition(
    tenant, django_capture_on_commit_callbacks
):
    node = make_node(cards=4)
    task = make_task(tenant=tenant, gpu_required=2)
    heard = []
    task_transitioned.connect(lambda sender, **kwargs: heard.append(kwargs), weak=False, dispatch_uid="t-bind")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            outcome = bind_task(_info(task), _node_info(node), [1, 2], config=SchedulerConfig())
    finally:
        task_transitioned.disconnect(dispatch_uid="t-bind")

    assert outcome.bound
    task.refresh_from_db()
    node.refresh_from_db()
    assert (task.status, task.node_id, task.gpus, task.port) == (lifecycle.SCHEDULED, node.id, [1, 2], None)
    assert task.scheduled_at is not None and task.status_changed_at == task.scheduled_at
    assert node.gpu_used == 2
    event = TaskEvent.objects.get(task=task)
    assert (event.from_status, event.to_status, event.reason) == (lifecycle.PENDING, lifecycle.SCHEDULED,
                                                                  f"bound to {node.name}")
    assert [(h["task_id"], h["from_status"], h["to_status"]) for h in heard] == [
        (task.id, lifecycle.PENDING, lifecycle.SCHEDULED)
    ]


def test_losing_the_claim_to_another_instance_is_a_silent_bind_conflict(tenant):
    node = make_node(cards=4)
    other = make_node(cards=4)
    task = make_task(tenant=tenant, gpu_required=1)
    info, node_info = _info(task), _node_info(node)
    assert bind_task(info, _node_info(other), [0], config=SchedulerConfig()).bound  # the other instance

    outcome = bind_task(info, node_info, [0], config=SchedulerConfig())

    assert outcome.conflict and not outcome.bound
    node.refresh_from_db()
    task.refresh_from_db()
    assert (node.gpu_used, task.node_id) == (0, other.id)
    assert TaskEvent.objects.filter(task=task).count() == 1


def test_a_card_taken_since_the_snapshot_is_replaced_by_a_free_one(tenant, other_tenant):
    node = make_node(cards=2)
    task = make_task(tenant=tenant, gpu_required=1)
    stale = _node_info(node)
    _occupy(node, other_tenant, [0])

    outcome = bind_task(_info(task), stale, [0], config=SchedulerConfig())

    assert outcome.bound and outcome.cards == (1,)
    task.refresh_from_db()
    assert task.gpus == [1]


def test_a_node_filled_since_the_snapshot_refuses_the_bind(tenant, other_tenant):
    node = make_node(cards=2)
    task = make_task(tenant=tenant, gpu_required=1)
    stale = _node_info(node)
    _occupy(node, other_tenant, [0, 1])

    outcome = bind_task(_info(task), stale, [0], config=SchedulerConfig())

    assert outcome.code == reasons.INSUFFICIENT_RESOURCES
    _unchanged(task, node, gpu_used=2)


def test_a_hot_card_is_swapped_for_a_cool_one_and_all_hot_cards_refuse_the_bind(tenant):
    node = make_node(cards=2)
    task = make_task(tenant=tenant, gpu_required=1)
    snapshot_node = _node_info(node)
    GPU.objects.filter(node=node, index=0).update(temperature=85)

    assert bind_task(_info(task), snapshot_node, [0], config=SchedulerConfig()).cards == (1,)

    other = make_task(tenant=tenant, gpu_required=1)
    outcome = bind_task(_info(other), snapshot_node, [0], config=SchedulerConfig())
    assert outcome.code == reasons.LOAD_THRESHOLD_EXCEEDED  # the one free card is too hot
    assert "85 °C" in outcome.message
    _unchanged(other, node, gpu_used=1)


@pytest.mark.parametrize(
    "node_fields, card_fields",
    [
        ({"cpu_percent": 90}, {}),
        ({"memory_used_mb": 472 * 1024}, {}),  # 92 % of 512 GB
        ({}, {"utilization": 96}),
        ({}, {"temperature": 80}),
        ({}, {"memory_used_mb": 78000}),  # 95.2 % of 81920 MB
    ],
)
def test_live_load_above_a_threshold_refuses_the_bind(tenant, node_fields, card_fields):
    node = make_node(cards=2)
    task = make_task(tenant=tenant, gpu_required=1)
    snapshot_node = _node_info(node)
    Node.objects.filter(id=node.id).update(**node_fields)
    GPU.objects.filter(node=node).update(**card_fields)

    outcome = bind_task(_info(task), snapshot_node, [0], config=SchedulerConfig())

    assert outcome.code == reasons.LOAD_THRESHOLD_EXCEEDED
    _unchanged(task, node, gpu_used=0)


def test_an_inference_task_gets_the_lowest_port_no_active_task_on_the_node_holds(tenant):
    node = make_node(cards=4)
    _occupy(node, tenant, [0], type=TaskType.INFERENCE, port=8000)
    _occupy(node, tenant, [1], type=TaskType.INFERENCE, port=8002)
    task = make_task(tenant=tenant, gpu_required=1, type=TaskType.INFERENCE)

    outcome = bind_task(_info(task), _node_info(node), [2], config=SchedulerConfig())

    assert outcome.bound and outcome.port == 8001
    task.refresh_from_db()
    assert task.port == 8001


def test_a_whole_card_task_with_gpu_memory_needs_that_much_free_after_reserve(tenant):
    node = make_node(cards=1, memory_mb=16384)
    task = make_task(tenant=tenant, gpu_required=1, gpu_memory_mb=15000)  # reserve is 1638 MB

    outcome = bind_task(_info(task), _node_info(node), [0], config=SchedulerConfig())

    assert outcome.code == reasons.INSUFFICIENT_RESOURCES
    _unchanged(task, node, gpu_used=0)


def test_a_fractional_task_gets_a_shard_and_its_env(tenant):
    node = make_node(cards=1, memory_mb=16384)
    task = make_task(tenant=tenant, gpu_memory_mb=4096)

    outcome = bind_task(_info(task), _node_info(node), [0], config=SchedulerConfig())

    assert outcome.bound
    task.refresh_from_db()
    node.refresh_from_db()
    assert (task.shard["card"], task.shard["memory_limit_mb"], task.gpus, node.gpu_used) == (0, 4096, [0], 0)
    assert task.env == task.shard["env"]


def test_a_shard_that_no_longer_fits_fails_the_bind_and_changes_nothing(tenant):
    node = make_node(cards=1, memory_mb=16384)
    task = make_task(tenant=tenant, gpu_memory_mb=8192)
    snapshot_node = _node_info(node)
    make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=[0], gpu_memory_mb=8192,
              shard={"card": 0, "memory_limit_mb": 8192, "compute_percent": 50})

    outcome = bind_task(_info(task), snapshot_node, [0], config=SchedulerConfig())

    assert outcome.code == reasons.SHARD_ALLOCATION_FAILED
    _unchanged(task, node, gpu_used=0)


def test_a_shard_joins_another_tenants_card_by_the_cycles_share_groups_without_reading_them_again(
        tenant, other_tenant):
    node = make_node(cards=1, memory_mb=16384)
    make_task(tenant=other_tenant, status=lifecycle.RUNNING, node=node, gpus=[0], gpu_memory_mb=2048,
              shard={"card": 0, "memory_limit_mb": 2048, "compute_percent": 20})
    joiner, refused = make_task(tenant=tenant, gpu_memory_mb=2048), make_task(tenant=tenant, gpu_memory_mb=2048)
    shared = TenancyView(groups_of={tenant.id: frozenset({1}), other_tenant.id: frozenset({1})},
                         dedicated_tenant_ids=frozenset())
    apart = TenancyView(groups_of={}, dedicated_tenant_ids=frozenset())
    snapshot_node, joiner_info = _node_info(node), _info(joiner)

    with CaptureQueriesContext(connection) as queries:
        outcome = bind_task(joiner_info, snapshot_node, [0], config=SchedulerConfig(), tenancy=shared)
    assert outcome.bound and outcome.shard["card"] == 0
    # Only the claim (and the savepoint around it): lock and live read go pipelined on the raw connection.
    assert [query["sql"].split()[0] for query in queries] == ["SAVEPOINT", "WITH", "RELEASE"]

    outcome = bind_task(_info(refused), snapshot_node, [0], config=SchedulerConfig(), tenancy=apart)
    assert outcome.code == reasons.SHARD_ALLOCATION_FAILED and "may not share" in outcome.message
    _unchanged(refused, node, gpu_used=0)


def test_no_port_left_rolls_the_bind_back_through_the_cycle(tenant, settings):
    settings.SCHEDULER = {**settings.SCHEDULER, "port_range_start": 8000, "port_range_end": 8001}
    node = make_node(cards=4)
    _occupy(node, tenant, [0], type=TaskType.INFERENCE, port=8000)
    _occupy(node, tenant, [1], type=TaskType.INFERENCE, port=8001)
    task = make_task(tenant=tenant, gpu_required=1, type=TaskType.INFERENCE)

    result = run_cycle(rng=random.Random(1))

    assert (result.bound, result.failed) == (0, 1)
    _unchanged(task, node, gpu_used=2)
    attempt = SchedulingAttempt.objects.get(task=task)
    assert attempt.code == reasons.PORTS_EXHAUSTED
    assert "8000–8001" in attempt.message


def test_cpu_above_threshold_rolls_the_bind_back_through_the_cycle(tenant):
    node = make_node(cards=4, cpu_percent=93)
    task = make_task(tenant=tenant, gpu_required=1)

    result = run_cycle(rng=random.Random(1))

    assert (result.bound, result.failed) == (0, 1)
    _unchanged(task, node, gpu_used=0)
    assert SchedulingAttempt.objects.get(task=task).code == reasons.LOAD_THRESHOLD_EXCEEDED


def test_a_node_over_the_cpu_threshold_is_skipped_for_the_rest_of_the_cycle_in_favour_of_the_runner_up(tenant):
    hot = make_node(name="hot", cards=8, cpu_percent=95)
    cool = make_node(name="cool", cards=2, cpu_percent=50)
    tasks = [make_task(tenant=tenant, gpu_required=1) for _ in range(3)]

    result = run_cycle(rng=random.Random(1))

    # The first task takes the cooler node; the second is refused by the hot node and binds to the runner-up;
    # the third finds the hot node already known overloaded and the cool node full.
    assert (result.bound, result.failed) == (2, 1)
    codes = set(SchedulingAttempt.objects.values_list("code", flat=True))
    assert codes == {reasons.SCHEDULED, reasons.LOAD_THRESHOLD_EXCEEDED}
    hot.refresh_from_db()
    cool.refresh_from_db()
    assert (hot.gpu_used, cool.gpu_used) == (0, 2)
    assert Task.objects.filter(id__in=[t.id for t in tasks], status=lifecycle.SCHEDULED).count() == 2
