"""Multi-node inference replicas (design §17.1): each replica `nodes_per_replica` members, one per node, placed whole
through the gang path with ranks and a master of its own, rebuilt whole when a member is lost, scaled and rolled
out replica by replica."""

from datetime import timedelta

import pytest
from django.utils import timezone

from nodes.models import Node
from scheduling.cycle.run import run_cycle
from scheduling.groups.budget import budget_permits
from scheduling.groups.crash_loop import crash_loop
from scheduling.groups.endpoints import group_endpoints, group_revisions
from scheduling.groups.replicas import live_replicas, rebuild_inference_groups
from scheduling.groups.rollout import drive_rollouts, task_group_update
from scheduling.groups.scale import task_group_scale
from scheduling.groups.services import task_group_create
from scheduling.hardware.drain import drain_nodes, node_drain
from scheduling.housekeeping.node_lost import release_lost_nodes
from scheduling.models import GroupEvent, Task, TaskGroup
from scheduling.queue.entries import GANG, take_active
from scheduling.queue.positions import compute_queue_positions
from scheduling.queue.weighted import entry_facts
from scheduling.selectors import agent_work
from scheduling.services.agent_reports import agent_report_status
from tests.factories import ledger_mismatches, make_node

pytestmark = pytest.mark.django_db


def one_card_nodes(*names: str) -> list[Node]:
    """Nodes of one subnet with one card each: a 2-node replica of 1-card members needs two of them."""
    return [make_node(name=name, cards=1, internal_ip=f"10.0.0.{index + 1}/24") for index, name in enumerate(names)]


def service(tenant, *, replicas: int = 1, nodes_per_replica: int = 2, **fields) -> TaskGroup:
    return task_group_create(tenant=tenant, name="llm", type="inference", world_size=1, gpus_per_worker=1,
                             replicas=replicas, nodes_per_replica=nodes_per_replica, image="vllm:1", **fields)


def members(group: TaskGroup, **filters) -> list[Task]:
    return list(group.members.filter(**filters).order_by("replica", "rank", "id"))


def run_all(group: TaskGroup) -> None:
    """Every scheduled member reports running, as its node agent would."""
    for member in members(group, status="scheduled"):
        assert agent_report_status(node=member.node, task_id=member.id, from_status="scheduled",
                                   to_status="running")


def stopped_by_agent(group: TaskGroup) -> None:
    for member in members(group, status="stopping"):
        assert agent_report_status(node=member.node, task_id=member.id, from_status="stopping",
                                   to_status="stopped")


def test_each_replica_is_its_members_ranked_inside_it(tenant):
    group = service(tenant, replicas=2)

    assert [(task.replica, task.rank, task.name, task.status) for task in members(group)] == [
        (0, 0, "llm-0-0", "pending"), (0, 1, "llm-0-1", "pending"),
        (1, 0, "llm-1-0", "pending"), (1, 1, "llm-1-1", "pending")]
    assert [(replica.index, len(replica.members)) for replica in live_replicas(group)] == [(1, 2), (0, 2)]


def test_the_queue_holds_each_replica_as_a_gang_of_its_own(tenant):
    group = service(tenant, replicas=2)
    single = task_group_create(tenant=tenant, name="small", type="inference", world_size=1, gpus_per_worker=1)

    entries = take_active(10)

    assert [(entry.kind, entry.id, entry.replica) for entry in entries if entry.kind == GANG] == [
        (GANG, group.id, 0), (GANG, group.id, 1)]
    assert [entry.id for entry in entries if entry.kind != GANG] == [single.members.get().id]


def test_a_waiting_replica_is_one_place_in_the_queue_and_weighs_its_own_cards(tenant):
    group = service(tenant, replicas=2)
    entries = take_active(10)

    positions = compute_queue_positions(order="priority")

    assert {task.id: positions[task.id] for task in members(group)} == {
        task.id: (task.replica + 1, 2) for task in members(group)}
    assert {key: facts.cards for key, facts in entry_facts(entries).items()} == {
        (GANG, group.id, 0): 2, (GANG, group.id, 1): 2}


def test_a_cycle_binds_both_members_of_a_replica_on_two_nodes_with_ranks_and_its_master(tenant):
    one_card_nodes("a", "b")
    group = service(tenant)

    result = run_cycle()

    assert result.bound == 2
    head, worker = members(group)
    assert {head.status, worker.status} == {"scheduled"} and head.node_id != worker.node_id
    assert (head.env["RANK"], worker.env["RANK"], head.env["WORLD_SIZE"]) == ("0", "1", "2")
    master = Node.objects.get(id=head.node_id).internal_ip.split("/")[0]
    assert head.env["MASTER_ADDR"] == worker.env["MASTER_ADDR"] == master
    assert head.env["HETEROFLOW_DIST_BACKEND"] == "nccl"  # one subnet: one network domain (design §10)
    assert ledger_mismatches() == []


def test_a_replica_that_finds_one_node_binds_neither_member(tenant):
    # One node with room for both members: a replica's members still take a node each.
    make_node(name="big", cards=8)
    group = service(tenant)

    result = run_cycle()

    assert result.bound == 0
    assert {task.status for task in members(group)} == {"pending"}
    assert Node.objects.get().gpu_used == 0
    group.refresh_from_db()
    assert group.diagnostics["code"] == "GangIncomplete" and "one node each" in group.diagnostics["reason"]


def test_of_two_replicas_on_three_nodes_one_binds_whole_and_the_other_waits_whole(tenant):
    one_card_nodes("a", "b", "c")
    group = service(tenant, replicas=2)

    assert run_cycle().bound == 2

    by_replica = {index: {task.status for task in members(group, replica=index)} for index in (0, 1)}
    assert by_replica == {0: {"scheduled"}, 1: {"pending"}}
    waiting = members(group, replica=1)
    assert all(task.parked_until is not None for task in waiting)  # parked as one gang after its failed attempt
    assert sum(Node.objects.values_list("gpu_used", flat=True)) == 2


@pytest.mark.django_db(transaction=True)
def test_a_lost_member_stops_the_other_and_the_replica_is_rebuilt_and_placed_whole(tenant):
    a, b, c = one_card_nodes("a", "b", "c")
    Node.objects.filter(id=c.id).update(schedulable=False)
    group = service(tenant)
    run_cycle()
    run_all(group)
    on = {task.node.name: task for task in members(group)}
    assert set(on) == {"a", "b"}
    Node.objects.filter(id=a.id).update(status="offline", last_heartbeat_at=timezone.now() - timedelta(hours=1))

    release_lost_nodes()

    lost, survivor = (Task.objects.get(id=on[name].id) for name in ("a", "b"))
    assert (lost.status, lost.reason) == ("failed", "NodeLost")
    assert survivor.status == "stopping" and survivor.reason.startswith("ReplicaMemberLost: replica 0 of llm")
    event = GroupEvent.objects.get(group=group)
    assert (event.kind, event.figures) == ("rebuilt", {"replica": 0})
    # Not rebuilt while the survivor still holds its card: the replica never runs twice.
    assert rebuild_inference_groups() == 0

    stopped_by_agent(group)
    Node.objects.filter(id=c.id).update(schedulable=True)
    assert rebuild_inference_groups() == 1
    rebuilt = members(group, replica=1)
    assert [(task.rank, task.status) for task in rebuilt] == [(0, "pending"), (1, "pending")]

    assert run_cycle().bound == 2
    placed = members(group, replica=1)
    assert {task.status for task in placed} == {"scheduled"}
    assert {task.node.name for task in placed} == {"b", "c"}
    assert placed[0].env["MASTER_ADDR"] == placed[1].env["MASTER_ADDR"]
    # Lost with its node, stopped for another member's loss: neither is a crash of the service.
    assert crash_loop(group).crashes == 0
    assert ledger_mismatches() == []


@pytest.mark.django_db(transaction=True)
def test_a_member_back_in_the_queue_before_either_ran_brings_the_whole_replica_back(tenant):
    a, _ = one_card_nodes("a", "b")
    group = service(tenant)
    run_cycle()
    on_a = next(task for task in members(group) if task.node_id == a.id)
    Node.objects.filter(id=a.id).update(status="offline", last_heartbeat_at=timezone.now() - timedelta(hours=1))

    release_lost_nodes()

    assert Task.objects.get(id=on_a.id).status == "pending"
    assert [(task.replica, task.status) for task in members(group)] == [(0, "pending"), (0, "pending")]
    assert not GroupEvent.objects.filter(group=group).exists()


def test_a_replica_that_crashed_counts_as_one_crash_however_many_members_failed(tenant):
    group = service(tenant, replicas=0)
    now = timezone.now()
    for replica, seconds in ((0, 30), (1, 10)):
        for rank in (0, 1):
            Task.objects.create(tenant=tenant, name=f"llm-{replica}-{rank}", type="inference", group=group,
                                replica=replica, rank=rank, status="failed", reason="exit code 1",
                                started_at=now - timedelta(seconds=seconds + 2),
                                finished_at=now - timedelta(seconds=seconds - rank))

    assert crash_loop(group).crashes == 2


def test_scaling_adds_and_removes_whole_replicas(tenant):
    group = service(tenant)

    task_group_scale(group=group, replicas=3)

    assert [(task.replica, task.rank) for task in members(group)] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]

    task_group_scale(group=group, replicas=1)

    assert [(task.replica, task.status) for task in members(group, status="stopped")] == [
        (1, "stopped"), (1, "stopped"), (2, "stopped"), (2, "stopped")]
    assert [replica.index for replica in live_replicas(group)] == [0]

    task_group_scale(group=group, replicas=2)
    # A replica's number is never used again: its members are found by it.
    assert [(task.replica, task.rank) for task in members(group, status="pending")] == [(0, 0), (0, 1), (3, 0),
                                                                                        (3, 1)]


def test_a_rollout_replaces_replica_by_replica_each_new_one_placed_whole(tenant):
    one_card_nodes("a", "b", "c", "d")
    group = service(tenant)
    run_cycle()
    run_all(group)
    task_group_update(group=group, image="vllm:2")

    drive_rollouts()

    new = members(group, revision=2)
    assert [(task.replica, task.rank, task.image) for task in new] == [(1, 0, "vllm:2"), (1, 1, "vllm:2")]
    assert run_cycle().bound == 2
    new = members(group, revision=2)
    assert {task.status for task in new} == {"scheduled"} and new[0].node_id != new[1].node_id
    assert (new[0].env["RANK"], new[1].env["RANK"]) == ("0", "1")
    assert new[0].env["MASTER_ADDR"] == new[1].env["MASTER_ADDR"]
    drive_rollouts()  # only scheduled: the new replica is not ready, the old one keeps serving
    assert not members(group, status="stopping")

    run_all(group)
    drive_rollouts()

    assert [(task.replica, task.status) for task in members(group, revision=1)] == [(0, "stopping"),
                                                                                    (0, "stopping")]
    assert [(revision["number"], revision["replicas"], revision["ready"]) for revision in group_revisions(group)] == [
        (2, 1, 1), (1, 1, 0)]


def test_a_replica_is_ready_and_has_an_endpoint_only_with_every_member_running(tenant):
    one_card_nodes("a", "b")
    group = service(tenant)
    run_cycle()
    head, worker = members(group)
    agent_report_status(node=head.node, task_id=head.id, from_status="scheduled", to_status="running")

    assert group_endpoints(group) == []

    agent_report_status(node=worker.node, task_id=worker.id, from_status="scheduled", to_status="running")

    head.refresh_from_db()
    assert group_endpoints(group) == [{"task": head.id, "replica": 0, "node": head.node.name,
                                       "address": "10.0.0.1" if head.node.name == "a" else "10.0.0.2",
                                       "port": head.port}]


def test_the_budget_counts_replicas_not_members(tenant):
    one_card_nodes("a", "b", "c", "d")
    group = service(tenant, replicas=2, min_available=1)
    run_cycle()
    run_all(group)
    first, second = live_replicas(group)[1], live_replicas(group)[0]

    assert budget_permits(task_id=first.members[1].id, action="drain")

    for member in second.members:
        Task.objects.filter(id=member.id).update(status="stopping")

    assert not budget_permits(task_id=first.members[1].id, action="drain")
    assert GroupEvent.objects.get(group=group).kind == "BudgetHeld"


def test_the_agent_probes_a_replica_at_its_master_only(tenant):
    one_card_nodes("a", "b")
    group = service(tenant, readiness={"path": "/health", "period_seconds": 10, "failure_threshold": 3})
    run_cycle()
    head, worker = members(group)

    assert agent_work(head.node)["start"][0]["readiness"]["path"] == "/health"
    assert agent_work(worker.node)["start"][0]["readiness"] is None
    run_all(group)
    assert [probe["id"] for probe in agent_work(head.node, probes=True)["probe"]] == [head.id]
    assert agent_work(worker.node, probes=True)["probe"] == []


@pytest.mark.django_db(transaction=True)
def test_a_drain_replaces_a_replica_with_a_member_there_whole_before_it_stops_it_whole(tenant, admin_user):
    a, _, _, _ = one_card_nodes("a", "b", "c", "d")
    Node.objects.exclude(name__in=("a", "b")).update(schedulable=False)
    group = service(tenant)
    run_cycle()
    run_all(group)
    old = members(group)
    Node.objects.exclude(name__in=("a", "b")).update(schedulable=True)

    node_drain(node=a, grace_seconds=None, actor=admin_user)

    replacement = members(group, replica=1)
    assert [(task.rank, task.status) for task in replacement] == [(0, "pending"), (1, "pending")]
    assert {Task.objects.get(id=task.id).status for task in old} == {"running"}
    run_cycle()
    run_all(group)
    assert {task.node.name for task in members(group, replica=1)} == {"c", "d"}

    drain_nodes()

    on_a = next(task for task in old if task.node_id == a.id)
    assert Task.objects.get(id=on_a.id).status == "stopping"
    stopped_by_agent(group)  # the member on a: its replica loses it and stops the other
    assert {Task.objects.get(id=task.id).status for task in old} == {"stopped", "stopping"}
    stopped_by_agent(group)
    assert [replica.index for replica in live_replicas(group)] == [1]
    assert rebuild_inference_groups() == 0
