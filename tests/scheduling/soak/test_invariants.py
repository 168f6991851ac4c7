"""The soak run's invariant checker finds each kind of damage, with its evidence, and passes a healthy database."""

import time
from datetime import timedelta

from django.utils import timezone

from nodes.agent.runtime import SIM_SECONDS_KEY, SimulatedRuntime, TaskSpec
from nodes.models import Node
from scheduling.models import Task, TaskEvent, TaskGroup
from scheduling.services.task_transition import task_transition
from scheduling.soak import invariants
from scheduling.soak.tenants import Ledger
from tests.factories import make_node, make_task


def running_on(node, tenant, gpus, **fields):
    task = make_task(tenant=tenant, gpu_required=len(gpus), **fields)
    assert task_transition(task.id, "pending", "scheduled", node=node, gpus=list(gpus))
    assert task_transition(task.id, "scheduled", "running")
    return task


def test_a_healthy_database_passes(tenant):
    node = make_node(cards=8)
    task = running_on(node, tenant, [0, 1], name="soak-0-task-1")
    ledger = Ledger(tasks={"soak-0-task-1": task.id, "soak-0-task-2": None})

    assert invariants.during_run(ledger) == []


def test_a_task_created_twice_or_lost_after_its_201_is_found(tenant):
    twice = [make_task(tenant=tenant, name="soak-0-task-1") for _ in range(2)]
    ledger = Ledger(tasks={"soak-0-task-1": twice[0].id, "soak-0-task-9": 4242})

    found = invariants.exactly_once(ledger)

    assert found == [f"task soak-0-task-1 exists 2 times (ids {sorted(t.id for t in twice)})",
                     "task soak-0-task-9 was acknowledged as id 4242 but the database has []"]


def test_an_illegal_or_skipped_transition_is_found(tenant):
    task = running_on(make_node(cards=8), tenant, [0])
    TaskEvent.objects.create(task=task, from_status="running", to_status="pending")
    skipped = running_on(make_node(cards=8), tenant, [0])
    TaskEvent.objects.create(task=skipped, from_status="stopping", to_status="stopped")

    found = invariants.legal_histories()

    assert f"task {task.id}: illegal transition running → pending" in found
    assert f"task {skipped.id}: stopping → stopped after it had become running" in found


def test_a_card_held_twice_and_a_wrong_gpu_used_are_found(tenant):
    node = make_node(cards=8, name="node-a")
    running_on(node, tenant, [0, 1])
    # A bind that skipped its compare-and-swap: a second task on card 1, the ledger not moved.
    Task.objects.create(tenant=tenant, name="doubled", status="running", node=node, gpus=[1], gpu_required=1)

    found = invariants.ledgers_agree()

    assert found == ["node node-a: gpu_used 2, active tasks hold 3", "node node-a: cards [1] held by several active tasks"]


def test_a_task_left_in_a_transient_state_past_its_loop_is_found(tenant):
    task = running_on(make_node(cards=8), tenant, [0])
    assert task_transition(task.id, "running", "stopping")
    Task.objects.filter(id=task.id).update(status_changed_at=timezone.now() - timedelta(hours=1))

    found = invariants.no_state_outlived_its_loop()

    assert len(found) == 1 and found[0].startswith(f"task {task.id} stopping since")


def test_the_agents_running_list_must_equal_the_control_planes(tenant, tmp_path):
    node = make_node(cards=8, name="node-a")
    task = running_on(node, tenant, [0])
    stopping = running_on(node, tenant, [1])
    assert task_transition(stopping.id, "running", "stopping")
    runtime = SimulatedRuntime(tmp_path / "node-a")
    long = {SIM_SECONDS_KEY: "60"}

    assert invariants.agent_disagreements(tmp_path, ["node-a"]) == {("node-a", task.id, "control plane only")}
    processes = [runtime.start(TaskSpec(id=task_id, image="x", command="y", labels=long))
                 for task_id in (task.id, stopping.id, 999999)]
    try:
        # A process just forked still shows its parent's command line until it runs its own.
        deadline = time.monotonic() + 10
        while invariants.agent_disagreements(tmp_path, ["node-a"]) != {("node-a", 999999, "agent only")}:
            assert time.monotonic() < deadline, invariants.agent_disagreements(tmp_path, ["node-a"])
            time.sleep(0.05)
    finally:
        for process in processes:
            process.popen.kill()
            process.popen.wait()
    disagreements = invariants.agent_disagreements(tmp_path, ["node-a"])
    assert disagreements == {("node-a", task.id, "control plane only")}, "a killed process runs nothing"
    assert invariants.agents_agree(disagreements) == [
        f"node node-a: the control plane has [{task.id}] running that its agent does not run; the agent runs [] the "
        "control plane does not expect"]


def test_a_gang_half_running_is_found(tenant):
    node = make_node(cards=8)
    gang = TaskGroup.objects.create(tenant=tenant, name="ddp", type="training", world_size=2, gpus_per_worker=1)
    running_on(node, tenant, [0], type="training", group=gang, rank=0)
    make_task(tenant=tenant, type="training", gpu_required=1, group=gang, rank=1)

    assert invariants.no_gang_half_running() == ["gang ddp: members {'pending': 1, 'running': 1}"]
    assert Node.objects.count() == 1


def test_a_task_placed_on_a_card_after_its_quarantine_is_found(tenant):
    from nodes.models import GPU

    node = make_node(cards=2)
    before = running_on(node, tenant, [0])
    GPU.objects.filter(node=node, index__in=[0, 1]).update(quarantined_at=timezone.now(), health="failed")
    # The task that was on card 0 when it failed is no finding (it is being stopped); one placed after is.
    assert invariants.nothing_placed_on_a_quarantined_card() == []
    time.sleep(0.01)
    late = running_on(node, tenant, [1])
    [finding] = invariants.nothing_placed_on_a_quarantined_card()
    assert finding.startswith(f"task {late.id} placed at") and "on card 1" in finding
    assert f"task {before.id} " not in finding
