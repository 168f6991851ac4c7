"""Gangs after a member is lost (design §15.5), through `manage.py run_loops` and the agent's reports."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from nodes.models import Node
from scheduling.groups.restart import reconcile_gangs
from scheduling.groups.services import task_group_create
from scheduling.models import Task, TaskGroup
from scheduling.services.agent_reports import agent_report_status
from scheduling.services.task_transition import task_transition
from tests.factories import ledger_mismatches, make_node

# The restart runs after the commit of the member's change, as in production.
pytestmark = pytest.mark.django_db(transaction=True)


def run_loops(*names: str) -> str:
    out = StringIO()
    call_command("run_loops", "--once", "--only", *names, stdout=out)
    return out.getvalue()


def lose(node: Node) -> None:
    Node.objects.filter(id=node.id).update(status="offline", last_heartbeat_at=timezone.now() - timedelta(hours=1))


def run(group: TaskGroup) -> list[Task]:
    """The members of the group's current run, by rank."""
    group.refresh_from_db()
    return list(Task.objects.filter(group=group, group_run=group.restarts).order_by("rank"))


def claim_all(group: TaskGroup) -> None:
    for member in run(group):
        if member.status == "scheduled":
            assert agent_report_status(node=member.node, task_id=member.id, from_status="scheduled",
                                       to_status="running")


@pytest.fixture
def gang_on_two_nodes(tenant):
    """A running 2 × 2-card gang, one member on node a and one on node b; node c is cordoned for now."""
    a, b = make_node(name="a", cards=2), make_node(name="b", cards=2)
    c = make_node(name="c", cards=2, schedulable=False)
    group = task_group_create(tenant=tenant, name="llm", type="training", world_size=2, gpus_per_worker=2)
    run_loops("cycle")
    claim_all(group)
    assert {member.node.name for member in run(group)} == {"a", "b"}
    group.refresh_from_db()
    assert group.status == "running"
    return group, a, b, c


def test_a_gang_that_loses_a_node_is_placed_again_whole_elsewhere(gang_on_two_nodes):
    group, a, b, c = gang_on_two_nodes
    first_run = {member.node.name: member for member in run(group)}
    lose(a)

    run_loops("node-lost")

    lost, survivor = (Task.objects.get(id=first_run[name].id) for name in ("a", "b"))
    assert (lost.status, lost.reason) == ("failed", "NodeLost")
    assert survivor.status == "stopping" and "rank" in survivor.reason
    group.refresh_from_db()
    assert (group.status, group.restarts) == ("restarting", 1)
    assert [(member.rank, member.status) for member in run(group)] == [(0, "pending"), (1, "pending")]

    # Not placed while the survivor still holds its cards: the gang never runs twice.
    Node.objects.filter(id=c.id).update(schedulable=True)
    run_loops("cycle")
    assert {member.status for member in run(group)} == {"pending"}

    assert agent_report_status(node=b, task_id=survivor.id, from_status="stopping", to_status="stopped")
    run_loops("cycle")
    second = run(group)
    assert {member.node.name for member in second} == {"b", "c"}
    group.refresh_from_db()
    assert group.status == "restarting"
    claim_all(group)
    group.refresh_from_db()
    assert group.status == "running"
    assert Node.objects.get(id=a.id).gpu_used == 0
    assert ledger_mismatches() == []


def test_restarts_are_bounded_by_max_restarts_then_the_group_fails(tenant):
    a, b = make_node(name="a", cards=2), make_node(name="b", cards=2)
    group = task_group_create(tenant=tenant, name="llm", type="training", world_size=2, gpus_per_worker=2,
                              max_restarts=0)
    run_loops("cycle")
    claim_all(group)
    survivor = next(member for member in run(group) if member.node_id == b.id)
    lose(a)

    run_loops("node-lost")

    group.refresh_from_db()
    assert (group.status, group.restarts) == ("failed", 0)
    assert Task.objects.filter(group=group).count() == 2
    assert Task.objects.get(id=survivor.id).status == "stopping"
    assert agent_report_status(node=b, task_id=survivor.id, from_status="stopping", to_status="stopped")
    group.refresh_from_db()
    assert group.status == "failed"
    assert group.diagnostics["code"] == "GangFailed"
    assert group.diagnostics["reason"].endswith("failed: NodeLost; all 0 restarts used")


def test_a_member_failing_with_an_error_restarts_the_gang(gang_on_two_nodes):
    group, a, b, _c = gang_on_two_nodes
    member = run(group)[0]

    assert agent_report_status(node=member.node, task_id=member.id, from_status="running", to_status="failed",
                               reason="exit code 1")

    group.refresh_from_db()
    assert (group.status, group.restarts) == ("restarting", 1)
    assert "exit code 1" in group.diagnostics["reason"]


def test_a_timed_out_member_fails_the_gang_without_a_restart(gang_on_two_nodes):
    group, *_ = gang_on_two_nodes
    member, other = run(group)
    assert task_transition(member.id, "running", "stopping", reason="Timeout")

    assert agent_report_status(node=member.node, task_id=member.id, from_status="stopping", to_status="stopped")

    assert Task.objects.get(id=member.id).status == "failed"
    assert Task.objects.get(id=other.id).status == "stopping"
    group.refresh_from_db()
    assert (group.status, group.restarts) == ("failed", 0)


def test_a_member_back_in_the_queue_before_anything_ran_takes_the_gang_back_without_a_restart(tenant):
    a, b = make_node(name="a", cards=2), make_node(name="b", cards=2)
    group = task_group_create(tenant=tenant, name="llm", type="training", world_size=2, gpus_per_worker=2)
    run_loops("cycle")
    group.refresh_from_db()
    assert group.status == "scheduled"
    Node.objects.filter(id=a.id).update(status="offline")

    run_loops("backlog")

    group.refresh_from_db()
    assert (group.status, group.restarts) == ("pending", 0)
    assert [(member.status, member.node_id) for member in run(group)] == [("pending", None), ("pending", None)]
    assert ledger_mismatches() == []


def test_the_backlog_sweep_mends_a_gang_whose_restart_was_never_run(gang_on_two_nodes):
    """As after a crash between a member's failure and its restart: the sweep finds the gang and restarts it."""
    group, *_ = gang_on_two_nodes
    member = run(group)[0]
    Task.objects.filter(id=member.id).update(status="failed", reason="NodeLost")

    assert reconcile_gangs() == 1
    assert reconcile_gangs() == 0
    group.refresh_from_db()
    assert group.restarts == 1


def test_stopping_one_member_stops_the_whole_gang(gang_on_two_nodes):
    group, *_ = gang_on_two_nodes
    member, other = run(group)
    assert task_transition(member.id, "running", "stopping", reason="stopped by user")

    assert agent_report_status(node=member.node, task_id=member.id, from_status="stopping", to_status="stopped")

    assert Task.objects.get(id=other.id).status == "stopping"
    assert agent_report_status(node=other.node, task_id=other.id, from_status="stopping", to_status="stopped")
    group.refresh_from_db()
    assert (group.status, group.restarts, group.diagnostics["code"]) == ("stopped", 0, "GangStopped")


def test_an_inference_replica_lost_with_its_node_is_rebuilt(tenant):
    lost_node = make_node(name="a", cards=2)
    group = task_group_create(tenant=tenant, name="serve", type="inference", world_size=1, gpus_per_worker=1,
                              replicas=1)
    run_loops("cycle")
    replica = group.members.get()
    assert agent_report_status(node=lost_node, task_id=replica.id, from_status="scheduled", to_status="running")
    make_node(name="b", cards=2)
    lose(lost_node)

    out = run_loops("node-lost", "inference-rebuild", "cycle")

    assert "inference-rebuild: 1 inference replica(s) created" in out
    assert Task.objects.get(id=replica.id).status == "failed"
    rebuilt = group.members.exclude(id=replica.id).get()
    assert (rebuilt.status, rebuilt.node.name) == ("scheduled", "b")
    group.refresh_from_db()
    assert group.status == "scheduled"


LONG_ERROR = "Traceback (most recent call last): " + "x" * 1000


def test_a_member_failing_with_a_reason_of_any_length_restarts_the_gang(gang_on_two_nodes):
    """issue 27 item 6: the gang's prefix on a near-300-character reason once overflowed `Task.reason`."""
    group, *_ = gang_on_two_nodes
    member = run(group)[0]

    assert agent_report_status(node=member.node, task_id=member.id, from_status="running", to_status="failed",
                               reason=LONG_ERROR)

    group.refresh_from_db()
    assert (group.status, group.restarts) == ("restarting", 1)
    failed = Task.objects.get(id=member.id)
    assert len(failed.reason) == 300 and failed.reason.endswith("…")
    assert all(len(task.reason) <= 300 for task in Task.objects.filter(group=group))


def test_one_gang_that_cannot_be_reconciled_leaves_the_later_ones_reconciled(gang_on_two_nodes, tenant, monkeypatch):
    """issue 27 item 6: a gang whose reconcile raised kept every later gang from being reached, minute after minute."""
    from scheduling.groups import restart

    group, *_ = gang_on_two_nodes
    later = task_group_create(tenant=tenant, name="later", type="training", world_size=2, gpus_per_worker=1)
    reached = []
    real = restart.reconcile_gang

    def failing_for_the_first(group_id):
        reached.append(group_id)
        if group_id == group.id:
            raise RuntimeError("this gang's reconcile fails")
        return real(group_id)

    monkeypatch.setattr(restart, "reconcile_gang", failing_for_the_first)
    Task.objects.filter(id=run(group)[0].id).update(status="failed", reason="NodeLost")

    assert reconcile_gangs() == 0
    assert reached == [group.id, later.id]


def test_a_gang_whose_card_fails_restarts_whole_away_from_the_quarantined_card(gang_on_two_nodes):
    """design §17.3: the member on the failed card is stopped and settles back to pending; the gang restarts as in
    §15.5, and its new run takes no quarantined card."""
    from nodes.models import GPU
    from nodes.services import node_heartbeat_apply
    from scheduling.preemption.settle import settle_preempted

    group, a, b, c = gang_on_two_nodes
    first_run = {member.node.name: member for member in run(group)}
    gpus = [{"index": index, "uuid": f"a-{index}", "type": "nvidia", "model": "A100", "memory_total_mb": 81920,
             "memory_used_mb": 0, "utilization": 0, "temperature": 30, "numa": None,
             "health": "failed" if index == 1 else "ok",
             "errors": [{"code": "xid-48", "message": "double-bit ECC error", "at": None}] if index == 1 else []}
            for index in range(2)]
    node_heartbeat_apply(node=a, cpu_percent=1, memory_used_mb=1, gpus=gpus, labels={})
    on_failed_card = Task.objects.get(id=first_run["a"].id)
    assert on_failed_card.status == "preempting" and on_failed_card.reason.startswith("CardFailed")

    assert settle_preempted(on_failed_card.id)
    group.refresh_from_db()
    assert (group.status, group.restarts) == ("restarting", 1)
    survivor = Task.objects.get(id=first_run["b"].id)
    assert survivor.status == "stopping"
    assert agent_report_status(node=b, task_id=survivor.id, from_status="stopping", to_status="stopped")
    Node.objects.filter(id=c.id).update(schedulable=True)
    run_loops("cycle")
    second = run(group)
    assert {member.node.name for member in second} == {"b", "c"}
    assert GPU.objects.get(node=a, index=1).quarantined
    assert Task.objects.get(id=on_failed_card.id).preempt_count == 0
