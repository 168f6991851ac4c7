"""Carrying out a plan and settling it (design §9): victims stay counted until their stop is confirmed."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from nodes.models import Node
from scheduling.queue import immediate_queue
from scheduling.cycle.run import run_cycle
from scheduling.lifecycle import IllegalTransition
from scheduling.models import SchedulingAttempt, Task, TaskEvent
from scheduling.preemption.candidates import CandidatePool
from scheduling.preemption.execute import NODE_REASONS_KEPT, PreemptionOutcome, execute_plan
from scheduling.preemption.planner import PreemptionPlan
from scheduling.preemption.settle import settle_preempted
from scheduling.services.task_transition import task_transition
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, task_info_from_row
from tests.factories import end_backoffs, make_node, make_task
from tests.scheduling.preemption.conftest import placed_task, statuses


def candidates_for(preemptor_id: int = 0, priority: int = 100) -> list:
    """What the first preemption attempt of a cycle reads."""
    return CandidatePool().candidates(preemptor_id=preemptor_id, priority=priority, victim_states={"running"})


def gpu_used(node: Node) -> int:
    return Node.objects.values_list("gpu_used", flat=True).get(id=node.id)


@pytest.fixture
def preempted_cluster(tenant, running_stage):
    """An 8-card node where a priority-90 task has just preempted the priority-10 holder of 4 cards."""
    node = make_node(cards=8)
    low = placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=10)
    mid = placed_task(tenant=tenant, node=node, gpus=[4, 5], priority=20)
    top = placed_task(tenant=tenant, node=node, gpus=[6, 7], priority=30)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=4)
    assert run_cycle().preempting == 1
    return node, low, mid, top, urgent


def test_the_victim_keeps_its_cards_and_the_ledger_while_preempting(preempted_cluster):
    node, low, *_ = preempted_cluster
    victim = Task.objects.get(id=low.id)
    assert (victim.status, victim.node_id, victim.gpus) == ("preempting", node.id, [0, 1, 2, 3])
    assert gpu_used(node) == 8


def test_the_victims_diagnostics_say_who_preempted_it(preempted_cluster, admin_client):
    _, low, _, _, urgent = preempted_cluster
    diagnostics = admin_client.get(f"/api/v1/tasks/{low.id}").json()["diagnostics"]
    assert diagnostics["preempted_by"] == urgent.id
    assert diagnostics["reason"].startswith(f"preempted by task {urgent.id} (priority 90)")
    event = TaskEvent.objects.get(task_id=low.id, to_status="preempting")
    assert event.reason == diagnostics["reason"]


def test_a_third_task_cannot_take_the_cards_before_the_victim_is_confirmed_stopped(preempted_cluster, tenant):
    node, low, mid, top, urgent = preempted_cluster
    # Training never preempts, so only a free card could place it.
    third = make_task(tenant=tenant, type="training", priority=95, gpu_required=4)

    cycle = run_cycle()

    assert statuses(low, mid, top, urgent, third) == ["preempting", "running", "running", "pending", "pending"]
    assert cycle.bound == 0 and gpu_used(node) == 8


def test_the_preemptor_waits_for_its_victims_instead_of_evicting_more(preempted_cluster):
    _, low, mid, top, urgent = preempted_cluster
    end_backoffs()

    cycle = run_cycle()

    assert cycle.preempting == 1
    assert statuses(low, mid, top, urgent) == ["preempting", "running", "running", "pending"]
    attempt = Task.objects.select_related("attempt").get(id=urgent.id).attempt
    assert attempt.code == "PreemptionPending"
    assert attempt.extra["preemption"]["victims"] == [low.id]


def test_the_preemptor_binds_in_a_later_cycle_once_the_victim_is_settled(preempted_cluster):
    node, low, mid, top, urgent = preempted_cluster
    assert settle_preempted(low.id)

    cycle = run_cycle()

    assert cycle.bound == 1
    urgent.refresh_from_db()
    assert (urgent.status, urgent.node_id, sorted(urgent.gpus)) == ("scheduled", node.id, [0, 1, 2, 3])
    assert statuses(low, mid, top) == ["pending", "running", "running"]
    assert gpu_used(node) == 8


def test_settlement_returns_the_placement_and_counts_the_preemption(preempted_cluster):
    node, low, *_ = preempted_cluster

    assert settle_preempted(low.id)

    victim = Task.objects.get(id=low.id)
    assert (victim.status, victim.node_id, victim.gpus, victim.port, victim.shard) == ("pending", None, [], None, None)
    assert (victim.preempt_count, victim.preemptible) == (1, False)
    assert gpu_used(node) == 4
    assert TaskEvent.objects.filter(task_id=low.id, from_status="preempting", to_status="pending").count() == 1


def test_settlement_releases_a_fractional_victims_shard(tenant):
    node = make_node(cards=1)
    shard = {"card": 0, "memory_limit_mb": 8000, "compute_percent": 20}
    victim = placed_task(tenant=tenant, node=node, gpu_memory_mb=8000, shard=shard, status="preempting")
    assert settle_preempted(victim.id)

    victim.refresh_from_db()
    assert (victim.status, victim.shard, victim.node_id) == ("pending", None, None)


def test_settlement_happens_at_most_once(preempted_cluster):
    node, low, *_ = preempted_cluster
    assert settle_preempted(low.id)
    assert not settle_preempted(low.id)
    assert not settle_preempted(low.id, forced=True)
    victim = Task.objects.get(id=low.id)
    assert victim.preempt_count == 1 and gpu_used(node) == 4


def test_only_a_preempting_task_can_be_settled(tenant):
    node = make_node(cards=2)
    running = placed_task(tenant=tenant, node=node, gpus=[0], priority=10)
    assert not settle_preempted(running.id)
    running.refresh_from_db()
    assert (running.status, running.node_id, running.preempt_count) == ("running", node.id, 0)


def test_a_victim_is_never_marked_succeeded(preempted_cluster):
    """design §16.1: the CAS refuses `preempting → succeeded` and changes nothing."""
    node, low, *_ = preempted_cluster
    held = gpu_used(node)
    with pytest.raises(IllegalTransition):
        task_transition(low.id, "preempting", "succeeded")
    assert statuses(low) == ["preempting"]
    assert gpu_used(node) == held


def test_settlement_wakes_the_preemptor(preempted_cluster, django_capture_on_commit_callbacks):
    _, low, _, _, urgent = preempted_cluster
    immediate_queue.connection().delete(immediate_queue.QUEUE_KEY)
    with django_capture_on_commit_callbacks(execute=True):
        assert settle_preempted(low.id)
    assert immediate_queue.drain() == [urgent.id]


def test_a_victim_lost_to_a_race_is_left_out_of_the_outcome(tenant):
    node = make_node(cards=4)
    gone = placed_task(tenant=tenant, node=node, gpus=[0, 1], priority=10)
    won = placed_task(tenant=tenant, node=node, gpus=[2, 3], priority=10)
    preemptor = make_task(tenant=tenant, priority=90, gpu_required=4)
    snapshot_node = build_snapshot().node(node.id)
    victims = tuple(sorted(candidates_for(preemptor.id), key=lambda victim: victim.id))
    plan = PreemptionPlan(node_id=node.id, node_name=snapshot_node.name, victims=victims)
    assert task_transition(gone.id, "running", "succeeded")
    preemptor_info = task_info_from_row(Task.objects.filter(id=preemptor.id).values_list(*TASK_INFO_FIELDS).get())
    outcome = execute_plan(plan, preemptor_info)

    assert (outcome.victims, outcome.lost) == ((won.id,), (gone.id,))
    assert outcome.preempting and outcome.code == "PreemptionPending"
    assert statuses(gone, won) == ["succeeded", "preempting"]
    assert not SchedulingAttempt.objects.filter(task_id=gone.id).exists()
    assert SchedulingAttempt.objects.get(task_id=won.id).extra["preempted_by"] == preemptor.id


def test_candidates_are_every_active_task_on_nodes_with_something_to_evict_in_two_plan_stable_queries(tenant):
    with_victim, without = make_node(cards=8), make_node(cards=8)
    victim = placed_task(tenant=tenant, node=with_victim, gpus=[0], priority=10)
    neighbour = placed_task(tenant=tenant, node=with_victim, gpus=[1], priority=99, preemptible=False)
    shard = placed_task(tenant=tenant, node=with_victim, gpu_memory_mb=4000, priority=99, preemptible=False,
                        shard={"card": 2, "memory_limit_mb": 3000, "compute_percent": 10})
    for gpus in ([0], [1]):
        placed_task(tenant=tenant, node=without, gpus=gpus, priority=99, preemptible=False)
    make_task(tenant=tenant, priority=10)  # pending: holds nothing

    with CaptureQueriesContext(connection) as queries:
        candidates = {task.id: task for task in candidates_for(priority=50)}

    # The nodes first, then their tasks by a list of ids: no semi-join whose plan depends on the statistics.
    assert len(queries) == 2 and "SELECT" not in queries[1]["sql"].split("WHERE", 1)[1]
    assert set(candidates) == {victim.id, neighbour.id, shard.id}
    assert (candidates[victim.id].cards, candidates[victim.id].gpu_required) == ((0,), 1)
    assert (candidates[shard.id].cards, candidates[shard.id].shard_memory_mb) == ((2,), 3000)
    assert candidates_for(priority=10) == []


def test_a_cluster_with_nothing_to_evict_costs_the_pool_one_query(tenant):
    placed_task(tenant=tenant, node=make_node(cards=8), gpus=[0], priority=99, preemptible=False)
    with CaptureQueriesContext(connection) as queries:
        assert CandidatePool().candidates(preemptor_id=0, priority=100, victim_states={"running"}) == []
    assert len(queries) == 1


def test_a_preemptors_own_unsettled_victims_are_candidates(tenant):
    node = make_node(cards=1)
    victim = placed_task(tenant=tenant, node=node, gpus=[0], priority=10, status="preempting")
    SchedulingAttempt.objects.create(task_id=victim.id, extra={"preempted_by": 4242})

    assert [task.preempted_by for task in candidates_for(preemptor_id=4242)] == [4242]
    assert candidates_for(preemptor_id=4243) == []


def test_a_cycles_pool_reads_once_and_keeps_in_step_with_its_binds_and_evictions(tenant):
    node, other = make_node(cards=8), make_node(cards=8)
    victim = placed_task(tenant=tenant, node=node, gpus=[0], priority=10)
    neighbour = placed_task(tenant=tenant, node=node, gpus=[1], priority=99, preemptible=False)
    placed_task(tenant=tenant, node=other, gpus=[0], priority=99, preemptible=False)
    pool = CandidatePool()

    def ids(**query):
        return {task.id for task in pool.candidates(victim_states={"running"}, **query)}

    with CaptureQueriesContext(connection) as queries:
        assert ids(preemptor_id=0, priority=50) == {victim.id, neighbour.id}
        assert ids(preemptor_id=0, priority=10) == set()
    assert len(queries) == 2

    newcomer = task_info_from_row(Task.objects.filter(id=make_task(tenant=tenant, gpu_required=1, priority=5, preemptible=True).id)
                                  .values_list(*TASK_INFO_FIELDS).get())
    pool.record_bind(newcomer, node_id=other.id, cards=(1,), shard=None)
    pool.record_preempting([victim.id], preemptor_id=77)

    assert ids(preemptor_id=0, priority=50) == set()  # the victim is stopping; the newcomer is only scheduled
    assert ids(preemptor_id=77, priority=50) == {victim.id, neighbour.id}
    assert {task.id for task in pool.candidates(preemptor_id=0, priority=50, victim_states={"scheduled"})} == {
        newcomer.id, *Task.objects.filter(node=other).values_list("id", flat=True)}


def test_two_urgent_tasks_in_one_cycle_evict_different_victims(tenant, running_stage):
    node = make_node(cards=8)
    low = placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=10)
    lower = placed_task(tenant=tenant, node=node, gpus=[4, 5, 6, 7], priority=5)
    for _ in range(2):
        make_task(tenant=tenant, priority=90, gpu_required=4)

    assert run_cycle().preempting == 2
    assert statuses(low, lower) == ["preempting", "preempting"]


def test_a_pool_finds_a_preemptors_own_unsettled_victims(tenant):
    node = make_node(cards=1)
    victim = placed_task(tenant=tenant, node=node, gpus=[0], priority=10, status="preempting")
    SchedulingAttempt.objects.create(task_id=victim.id, extra={"preempted_by": 4242})
    pool = CandidatePool()

    assert [task.id for task in pool.candidates(preemptor_id=4242, priority=5, victim_states={"running"})] == [
        victim.id]
    assert pool.candidates(preemptor_id=4243, priority=5, victim_states={"running"}) == []


def test_a_pool_reads_only_the_nodes_holding_something_to_evict_or_stopping(tenant):
    evictable, stopping, locked_in = make_node(cards=8), make_node(cards=8), make_node(cards=8)
    placed_task(tenant=tenant, node=evictable, gpus=[0], priority=10)
    placed_task(tenant=tenant, node=evictable, gpus=[1], priority=99, preemptible=False)
    placed_task(tenant=tenant, node=stopping, gpus=[0], priority=10, status="preempting", preemptible=False)
    placed_task(tenant=tenant, node=locked_in, gpus=[0], priority=10, preemptible=False)
    placed_task(tenant=tenant, node=locked_in, gpus=[1], priority=10, preemptible=True, type="inference")

    # The nodes whose active tasks the pool read (what the pool is for has no public reader of it).
    assert set(CandidatePool()._tasks_by_node()) == {evictable.id, stopping.id}


def test_a_failed_preemption_keeps_at_most_twenty_node_reasons_and_counts_them_all():
    """issue 27 item 5: one entry per cluster node per failed preemption bloated every attempt's write."""
    reasons = {f"node-{index:03}": ("no eligible victims" if index % 3 else "preemption would not help (x)")
               for index in range(250)}
    stored = PreemptionOutcome(code="InsufficientResources", message="", node_reasons=reasons).diagnostics
    assert len(stored["preemption"]["node_reasons"]) == NODE_REASONS_KEPT == 20
    assert stored["preemption"]["node_reason_counts"] == {"no eligible victims": 166,
                                                          "preemption would not help (x)": 84}

