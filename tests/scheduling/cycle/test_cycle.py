"""The scheduling cycle of design §4 end to end against PostgreSQL: placement policy, the walk-through of design §5,
the 200-entry bound and the queue order of design §15.1."""

import random
from collections import Counter

import pytest

from nodes.models import GPU, Node
from scheduling import lifecycle
from scheduling.cycle.run import CYCLE_LIMIT, run_cycle
from scheduling.framework import reasons
from scheduling.models import AttemptCodeCount, CycleRecord, PluginConfig, SchedulingAttempt, Task
from scheduling.plugins import gpu_filter, resource_filter
from scheduling.plugins.availability import NODE_OFFLINE
from scheduling.plugins.resource_prefilter import INSUFFICIENT_GPU
from scheduling.plugins.tenant import DEDICATED_OTHER_TENANT
from scheduling.queue import immediate_queue
from scheduling.queue import services as queue_services
from scheduling.signals import cycle_completed
from tests.factories import end_backoffs, make_node, make_task

pytestmark = pytest.mark.django_db


def _placements(tasks) -> Counter:
    return Counter(Task.objects.filter(id__in=[task.id for task in tasks]).values_list("node__name", flat=True))


def _switch_to_binpack():
    PluginConfig.objects.update_or_create(name="spread", defaults={"enabled": False, "weight": 0})
    PluginConfig.objects.update_or_create(name="binpack", defaults={"enabled": True, "weight": 1})


def test_six_one_card_tasks_land_three_and_three_under_spread_in_one_cycle(tenant):
    make_node(name="a", cards=8)
    make_node(name="b", cards=8)
    tasks = [make_task(tenant=tenant, gpu_required=1) for _ in range(6)]

    result = run_cycle(rng=random.Random(1))

    assert (result.considered, result.bound, result.failed) == (6, 6, 0)
    assert _placements(tasks) == {"a": 3, "b": 3}
    assert dict(Node.objects.values_list("name", "gpu_used")) == {"a": 3, "b": 3}


def test_six_one_card_tasks_land_on_one_node_under_binpack_read_from_plugin_config_rows(tenant):
    _switch_to_binpack()
    make_node(name="a", cards=8)
    make_node(name="b", cards=8)
    tasks = [make_task(tenant=tenant, gpu_required=1) for _ in range(6)]

    run_cycle(rng=random.Random(1))

    assert sorted(_placements(tasks).values()) == [6]


def test_spec_walkthrough_binds_to_the_free_nvidia_node_and_explains_every_other_node(
    tenant, other_tenant, tenant_client
):
    make_node(name="offline", status=Node.Status.OFFLINE)
    make_node(name="dedicated", dedicated_tenant=other_tenant)
    hot = make_node(name="hot")
    GPU.objects.filter(node=hot).update(memory_used_mb=79000)  # 96 % of 81920 MB on every card
    make_node(name="ascend", gpu_type="ascend", model="Ascend 910B")
    free = make_node(name="free")
    task = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=4)

    result = run_cycle(rng=random.Random(3))

    assert result.bound == 1
    task.refresh_from_db()
    assert (task.status, task.node_id, len(task.gpus)) == (lifecycle.SCHEDULED, free.id, 4)
    free.refresh_from_db()
    assert free.gpu_used == 4
    assert set(Node.objects.exclude(id=free.id).values_list("gpu_used", flat=True)) == {0}

    diagnostics = tenant_client.get(f"/api/v1/tasks/{task.id}").json()["diagnostics"]
    assert diagnostics["code"] == reasons.SCHEDULED
    assert diagnostics["message"].startswith("1/5 nodes are available")
    reason_of = {entry["node"]: entry["reason"] for entry in diagnostics["nodes"]}
    # The node dedicated to the other tenant is counted for this tenant, not named (issue 13).
    assert diagnostics["nodes_not_shown"] == {DEDICATED_OTHER_TENANT: 1}
    assert reason_of == {
        "offline": NODE_OFFLINE,
        "hot": resource_filter.CARDS_OVERLOADED,
        "ascend": gpu_filter.GPU_TYPE_MISMATCH,
        "free": None,
    }
    scored = next(entry for entry in diagnostics["nodes"] if entry["node"] == "free")
    assert scored["scores"] and scored["total"] is not None


def test_a_task_that_fits_nowhere_stays_pending_with_its_code_and_the_code_is_counted(tenant):
    make_node(name="small", cards=2)
    # A node that could hold it when it is back: the task fits nowhere now, not never (that is NeverFits).
    make_node(name="away", cards=4, status="offline")
    task = make_task(tenant=tenant, gpu_required=4)

    result = run_cycle()

    assert (result.considered, result.bound, result.failed) == (1, 0, 1)
    task.refresh_from_db()
    assert task.status == lifecycle.PENDING
    attempt = SchedulingAttempt.objects.get(task=task)
    assert attempt.code == reasons.INSUFFICIENT_RESOURCES
    assert attempt.message.startswith(f"0/2 nodes are available: 1 {INSUFFICIENT_GPU}, 1 {NODE_OFFLINE}.")
    assert AttemptCodeCount.objects.get(code=reasons.INSUFFICIENT_RESOURCES).count == 1
    assert run_cycle().considered == 0  # parked
    end_backoffs()
    run_cycle()
    assert AttemptCodeCount.objects.get(code=reasons.INSUFFICIENT_RESOURCES).count == 2


def test_higher_priority_tasks_take_the_last_cards_first(tenant):
    make_node(name="one", cards=1)
    low = make_task(tenant=tenant, gpu_required=1, priority=10)
    high = make_task(tenant=tenant, gpu_required=1, priority=90)

    run_cycle()

    assert Task.objects.get(id=high.id).status == lifecycle.SCHEDULED
    assert Task.objects.get(id=low.id).status == lifecycle.PENDING


def test_a_cycle_records_itself_and_tells_listeners_after_commit(tenant, django_capture_on_commit_callbacks):
    make_node(cards=1)
    make_task(tenant=tenant, gpu_required=1)
    heard = []

    def listener(sender, signal, **figures):
        heard.append(figures)

    cycle_completed.connect(listener)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            result = run_cycle()
    finally:
        cycle_completed.disconnect(listener)

    record = CycleRecord.objects.get()
    assert (record.considered, record.bound, record.failed, record.preempting) == (1, 1, 0, 0)
    assert heard == [{"cycle_id": record.id, "considered": 1, "bound": 1, "failed": 0, "preempting": 0,
                      "duration_ms": result.duration_ms}]


def test_the_immediate_queue_never_puts_a_new_task_ahead_of_older_higher_priority_work(tenant):
    make_node(name="one", cards=1)
    older_high = make_task(tenant=tenant, gpu_required=1, priority=90)
    fresh_low = make_task(tenant=tenant, gpu_required=1, priority=10)
    immediate_queue.push(fresh_low.id)

    run_cycle()

    assert Task.objects.get(id=older_high.id).status == lifecycle.SCHEDULED
    assert Task.objects.get(id=fresh_low.id).status == lifecycle.PENDING
    assert immediate_queue.length() == 0


def test_one_free_card_goes_to_the_old_priority_90_task_not_to_twenty_new_priority_10_tasks(tenant):
    make_node(name="one", cards=1)
    old_high = make_task(tenant=tenant, gpu_required=1, priority=90)
    new_low = [make_task(tenant=tenant, gpu_required=1, priority=10) for _ in range(20)]
    for task in new_low:
        immediate_queue.push(task.id)

    run_cycle()

    assert Task.objects.get(id=old_high.id).status == lifecycle.SCHEDULED
    assert not Task.objects.filter(id__in=[task.id for task in new_low], status=lifecycle.SCHEDULED).exists()


def _bulk_pending(tenant, count: int, **fields) -> list[Task]:
    return Task.objects.bulk_create(Task(tenant=tenant, name=f"t{i}", **fields) for i in range(count))


@pytest.fixture
def long_backoff(monkeypatch):
    """Backoffs long enough that no parked task comes back by time alone while a test runs its cycles."""
    monkeypatch.setattr(queue_services, "BACKOFF_INITIAL_SECONDS", 600)


def test_a_cycle_takes_at_most_200_entries_and_parked_work_lets_the_next_cycles_reach_the_tail_of_1000(
    tenant, long_backoff
):
    make_node(name="tiny", cards=1)
    _bulk_pending(tenant, 999, gpu_required=2, priority=60)
    tail = make_task(tenant=tenant, gpu_required=2, priority=5)

    considered = [run_cycle().considered for _ in range(5)]

    assert considered == [CYCLE_LIMIT] * 5
    assert SchedulingAttempt.objects.filter(task=tail).exists()
    assert SchedulingAttempt.objects.count() == 1000
    assert run_cycle().considered == 0


def test_a_placeable_one_card_task_behind_300_unplaceable_eight_card_tasks_binds_in_one_cycle(
    tenant, long_backoff
):
    make_node(name="small", cards=4)
    _bulk_pending(tenant, 300, gpu_required=8, priority=90)
    run_cycle()
    run_cycle()  # every 8-card task has been tried and is parked
    one_card = make_task(tenant=tenant, gpu_required=1, priority=10)

    result = run_cycle()

    assert Task.objects.get(id=one_card.id).status == lifecycle.SCHEDULED
    assert (result.considered, result.bound) == (1, 1)


def test_a_parked_task_binds_in_the_next_cycle_after_a_node_frees_cards_without_waiting_for_its_backoff(
    tenant, long_backoff
):
    from scheduling.services.task_transition import task_transition

    make_node(name="one", cards=1)
    running = make_task(tenant=tenant, gpu_required=1, priority=90)
    run_cycle()
    waiting = make_task(tenant=tenant, gpu_required=1)
    run_cycle()
    waiting.refresh_from_db()
    assert waiting.status == lifecycle.PENDING and waiting.parked_until is not None
    assert run_cycle().considered == 0  # parked: the next cycle leaves it alone

    task_transition(running.id, lifecycle.SCHEDULED, lifecycle.STOPPING)
    task_transition(running.id, lifecycle.STOPPING, lifecycle.STOPPED)
    run_cycle()

    assert Task.objects.get(id=waiting.id).status == lifecycle.SCHEDULED


def test_the_plugin_set_is_read_from_the_database_at_every_cycle(tenant):
    make_node(name="a", cards=8)
    make_node(name="b", cards=8)
    first = [make_task(tenant=tenant, gpu_required=1) for _ in range(2)]
    run_cycle(rng=random.Random(1))
    assert sorted(_placements(first).values()) == [1, 1]

    _switch_to_binpack()
    second = [make_task(tenant=tenant, gpu_required=1) for _ in range(4)]
    run_cycle(rng=random.Random(1))
    assert sorted(_placements(second).values()) == [4]


def test_an_inactive_tenants_pending_tasks_are_held_its_running_ones_go_on_and_activation_releases_them(
    tenant, other_tenant
):
    from scheduling.services.task_transition import task_transition
    from tenants.services import tenant_update
    from tests.scheduling.groups.test_gang import training_group

    make_node(name="a", cards=8)
    running = make_task(tenant=tenant, gpu_required=1)
    run_cycle()
    assert task_transition(running.id, lifecycle.SCHEDULED, lifecycle.RUNNING)
    tenant_update(tenant_id=tenant.id, status="inactive")
    held = make_task(tenant=tenant, gpu_required=1)
    gang = training_group(tenant, world_size=2)
    others = make_task(tenant=other_tenant, gpu_required=1)

    result = run_cycle()

    assert result.bound == 1 and Task.objects.get(id=others.id).status == lifecycle.SCHEDULED
    assert Task.objects.get(id=running.id).status == lifecycle.RUNNING
    held_ids = [held.id, *gang.members.values_list("id", flat=True)]
    assert set(Task.objects.filter(id__in=held_ids).values_list("status", flat=True)) == {lifecycle.PENDING}
    assert set(SchedulingAttempt.objects.filter(task_id__in=held_ids).values_list("code", flat=True)) == {
        reasons.TENANT_INACTIVE}

    tenant_update(tenant_id=tenant.id, status="active")
    run_cycle()

    assert set(Task.objects.filter(id__in=held_ids).values_list("status", flat=True)) == {lifecycle.SCHEDULED}
