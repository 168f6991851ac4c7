"""Gang scheduling of training groups (design §10) against PostgreSQL: placement, all-or-nothing, network, GPU type."""

import itertools
import random
from collections import Counter
from dataclasses import replace

import pytest

from nodes.agent.topology import TOPOLOGY_LABEL
from nodes.models import GPU, Node
from scheduling import lifecycle
from scheduling.bind import pipeline
from scheduling.cache.snapshot_builder import build_snapshot
from scheduling.framework import reasons
from scheduling.framework.framework import Framework
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.groups.gang_bind import GangKey, schedule_groups
from scheduling.groups.services import task_group_create
from scheduling.models import SchedulingAttempt, Task, TaskEvent, TaskGroup
from scheduling.plugins import build_plugin_set, gpu_filter
from scheduling.plugins.resource_prefilter import INSUFFICIENT_GPU
from tests.factories import make_node

pytestmark = pytest.mark.django_db

PATHS = ["tensor", "data", "greedy", "coschedule", "pipeline"]


def run_gangs(seed: int = 1):
    framework = Framework(build_plugin_set([]), SchedulerConfig.from_settings())
    snapshot = build_snapshot()
    return schedule_groups(_waiting_group_ids(), snapshot, framework, random.Random(seed)), snapshot


def _waiting_group_ids() -> list[GangKey]:
    """The groups with a pending member, oldest first (the queue's order for gangs of one priority)."""
    return [GangKey(group_id) for group_id in TaskGroup.objects.filter(members__status=lifecycle.PENDING)
            .distinct().order_by("created_at", "id").values_list("id", flat=True)]


def training_group(tenant, *, world_size: int, gpus_per_worker: int = 1, parallelism: str = "data",
                   gpu_type: str = "", name: str = "llm") -> TaskGroup:
    return task_group_create(tenant=tenant, name=name, type="training", world_size=world_size,
                             gpus_per_worker=gpus_per_worker, parallelism=parallelism, gpu_type=gpu_type)


def members(group: TaskGroup) -> list[Task]:
    return list(group.members.select_related("node").order_by("rank"))


def three_nodes():
    """Three 8-card nodes in one subnet; a1 and a2 share rack r1, b (created first) stands alone in rack r2."""
    lone = make_node(name="b", zone="z1", rack="r2", internal_ip="10.0.0.3/24", public_ip="203.0.113.3")
    a1 = make_node(name="a1", zone="z1", rack="r1", internal_ip="10.0.0.1/24", public_ip="203.0.113.1")
    a2 = make_node(name="a2", zone="z1", rack="r1", internal_ip="10.0.0.2/24", public_ip="203.0.113.2")
    return lone, a1, a2


def test_sixteen_data_parallel_workers_land_on_the_two_same_rack_nodes_with_one_master(tenant, tenant_client):
    _lone, a1, a2 = three_nodes()
    group = training_group(tenant, world_size=16)

    results, snapshot = run_gangs()

    assert [result.code for result in results] == [reasons.SCHEDULED]
    placed = members(group)
    assert [task.rank for task in placed] == list(range(16))
    assert {task.status for task in placed} == {lifecycle.SCHEDULED}
    assert Counter(task.node.name for task in placed) == {"a1": 8, "a2": 8}
    assert dict(Node.objects.values_list("name", "gpu_used")) == {"a1": 8, "a2": 8, "b": 0}
    master = placed[0].node.internal_ip.split("/")[0]
    assert {task.env["MASTER_ADDR"] for task in placed} == {master}
    assert {task.env["HETEROFLOW_DIST_BACKEND"] for task in placed} == {"nccl"}
    assert [task.env["RANK"] for task in placed] == [str(rank) for rank in range(16)]
    assert {(task.env["WORLD_SIZE"], task.env["MASTER_PORT"]) for task in placed} == {("16", "29500")}
    for node in (a1, a2):  # every card of a node used once
        assert sorted(card for task in placed if task.node_id == node.id for card in task.gpus) == list(range(8))
    # The in-memory snapshot saw the bind, so the rest of the cycle does not count these cards again.
    assert {node.name: node.gpu_used for node in snapshot.nodes} == {"a1": 8, "a2": 8, "b": 0}

    body = tenant_client.get(f"/api/v1/task-groups/{group.id}").json()
    assert (body["status"], body["diagnostics"]["code"]) == ("scheduled", reasons.SCHEDULED)
    assert {(m["master_addr"], m["backend"]) for m in body["members"]} == {(master, "nccl")}


def test_a_gang_too_big_for_the_cluster_binds_nothing_holds_nothing_and_names_the_member(tenant, tenant_client):
    three_nodes()
    group = training_group(tenant, world_size=32)

    results, snapshot = run_gangs()

    assert [result.code for result in results] == [reasons.GANG_INCOMPLETE]
    assert set(Node.objects.values_list("gpu_used", flat=True)) == {0}
    assert {task.status for task in members(group)} == {lifecycle.PENDING}
    assert not TaskEvent.objects.filter(to_status=lifecycle.SCHEDULED).exists()
    assert {node.gpu_used for node in snapshot.nodes} == {0}
    stuck = members(group)[24]
    diagnostics = tenant_client.get(f"/api/v1/task-groups/{group.id}").json()["diagnostics"]
    assert diagnostics["code"] == reasons.GANG_INCOMPLETE
    assert diagnostics["member"] == {"rank": 24, "task": stuck.id}
    assert diagnostics["reason"] == "0/3 nodes are available: 3 Insufficient GPU."
    assert "rank 24" in diagnostics["message"]
    attempt = tenant_client.get(f"/api/v1/tasks/{stuck.id}").json()["diagnostics"]
    assert attempt["code"] == reasons.GANG_INCOMPLETE
    assert {entry["reason"] for entry in attempt["nodes"]} == {INSUFFICIENT_GPU}
    assert set(SchedulingAttempt.objects.values_list("code", flat=True)) == {reasons.GANG_INCOMPLETE}


def test_a_failed_claim_of_the_last_member_rolls_back_every_member(tenant, monkeypatch):
    three_nodes()
    group = training_group(tenant, world_size=16)
    last = members(group)[-1]
    real_claim = pipeline.claim

    def lose_the_last_claim(claims):
        claimed = real_claim(claims)
        return replace(claimed, task_ids=claimed.task_ids - {last.id})

    monkeypatch.setattr(pipeline, "claim", lose_the_last_claim)

    results, _ = run_gangs()

    assert [result.code for result in results] == [reasons.BIND_CONFLICT]
    assert {(task.status, task.node_id, tuple(task.gpus), bool(task.env)) for task in members(group)} == {
        (lifecycle.PENDING, None, (), False)}
    assert set(Node.objects.values_list("gpu_used", flat=True)) == {0}
    assert not TaskEvent.objects.filter(to_status=lifecycle.SCHEDULED).exists()
    group.refresh_from_db()
    assert (group.status, group.master_addr) == (TaskGroup.Status.PENDING, "")
    assert group.diagnostics["member"] == {"rank": 15, "task": last.id}


def test_live_recheck_refusing_one_node_leaves_the_whole_gang_pending(tenant):
    three_nodes()
    group = training_group(tenant, world_size=16)
    framework = Framework(build_plugin_set([]), SchedulerConfig.from_settings())
    snapshot = build_snapshot()
    # After the snapshot was taken, every card of both rack-r1 nodes ran hot.
    GPU.objects.filter(node__name__in=["a1", "a2"]).update(temperature=85)

    results = schedule_groups(_waiting_group_ids(), snapshot, framework, random.Random(1))

    assert [result.code for result in results] == [reasons.LOAD_THRESHOLD_EXCEEDED]
    assert {task.status for task in members(group)} == {lifecycle.PENDING}
    assert set(Node.objects.values_list("gpu_used", flat=True)) == {0}
    # The refused nodes were refreshed in the snapshot, which now knows the cards are hot.
    assert {card.temperature for node in snapshot.nodes if node.name == "a1" for card in node.cards} == {85}


def test_nodes_in_different_subnets_get_the_public_master_address_and_gloo(tenant):
    make_node(name="x", internal_ip="10.0.1.5/24", public_ip="203.0.113.10")
    make_node(name="y", internal_ip="10.0.2.5/24", public_ip="203.0.113.20")
    group = training_group(tenant, world_size=12)

    run_gangs()

    placed = members(group)
    assert {task.status for task in placed} == {lifecycle.SCHEDULED}
    assert len({task.node_id for task in placed}) == 2
    expected_master = placed[0].node.public_ip
    assert {(task.env["MASTER_ADDR"], task.env["HETEROFLOW_DIST_BACKEND"]) for task in placed} == {
        (expected_master, "gloo")}
    group.refresh_from_db()
    assert (group.master_addr, group.backend) == (expected_master, "gloo")


@pytest.mark.parametrize("parallelism", PATHS)
def test_every_path_keeps_strictly_to_the_declared_gpu_type(tenant, parallelism):
    make_node(name="nv-1")
    make_node(name="nv-2")
    ascend = make_node(name="ascend", gpu_type="ascend", model="Ascend 910B")
    fits = training_group(tenant, world_size=4, gpus_per_worker=2, gpu_type="ascend", parallelism=parallelism)

    run_gangs()

    assert {(task.status, task.node_id) for task in members(fits)} == {(lifecycle.SCHEDULED, ascend.id)}
    too_big = training_group(tenant, world_size=2, gpus_per_worker=2, gpu_type="ascend", parallelism=parallelism,
                             name="more")

    results, _ = run_gangs()

    assert [result.code for result in results] == [reasons.GANG_INCOMPLETE]
    assert {task.status for task in members(too_big)} == {lifecycle.PENDING}
    too_big.refresh_from_db()
    assert gpu_filter.GPU_TYPE_MISMATCH in too_big.diagnostics["reason"]
    assert dict(Node.objects.values_list("name", "gpu_used")) == {"nv-1": 0, "nv-2": 0, "ascend": 8}


@pytest.mark.parametrize("parallelism", PATHS)
@pytest.mark.parametrize("kunlun_node,explanation", [
    (None, "no kunlun node in the cluster"),
    ({"dedicated": True}, "no kunlun node within the tenant's reach: 1 dedicated to another tenant"),
    ({"status": "offline"}, "no kunlun node available now: 1 offline or cordoned"),
])
def test_a_gpu_type_out_of_reach_is_an_explicit_gpu_type_unavailable(tenant, other_tenant, parallelism,
                                                                    kunlun_node, explanation):
    make_node(name="nv")
    if kunlun_node is not None:
        make_node(name="kunlun", gpu_type="kunlun", status=kunlun_node.get("status", "online"),
                  dedicated_tenant=other_tenant if kunlun_node.get("dedicated") else None)
    group = training_group(tenant, world_size=2, gpu_type="kunlun", parallelism=parallelism)

    results, _ = run_gangs()

    assert [result.code for result in results] == [reasons.GPU_TYPE_UNAVAILABLE]
    group.refresh_from_db()
    assert group.status == TaskGroup.Status.PENDING
    assert group.diagnostics == {"code": reasons.GPU_TYPE_UNAVAILABLE, "message": explanation, "member": None,
                                 "reason": explanation}
    assert {task.status for task in members(group)} == {lifecycle.PENDING}
    assert set(SchedulingAttempt.objects.values_list("code", flat=True)) == {reasons.GPU_TYPE_UNAVAILABLE}
    assert set(Node.objects.values_list("gpu_used", flat=True)) == {0}


def test_greedy_uses_the_fewest_nodes(tenant):
    for name in ("small-1", "small-2", "small-3"):
        make_node(name=name, cards=4, rack="r1")
    make_node(name="big", cards=8, rack="r2")
    make_node(name="mid", cards=6, rack="r3")
    group = training_group(tenant, world_size=12, parallelism="greedy")

    run_gangs()

    assert Counter(task.node.name for task in members(group)) == {"big": 8, "mid": 4}


def test_pipeline_keeps_consecutive_ranks_in_one_rack(tenant):
    # Racks interleaved by creation order, so an order by id or by score alone would alternate them.
    for name, rack in (("n1", "r1"), ("n2", "r2"), ("n3", "r1"), ("n4", "r2")):
        make_node(name=name, cards=2, zone="z1", rack=rack)
    group = training_group(tenant, world_size=6, parallelism="pipeline")

    run_gangs()

    placed = members(group)
    racks = [task.node.rack for task in placed]
    assert sum(1 for before, after in itertools.pairwise(racks) if before != after) == 1
    assert racks[:4] == [racks[0]] * 4
    stages = [task.node.name for task in placed]
    assert stages[0::2] == stages[1::2]  # ranks 2k and 2k+1 share a node


def test_tensor_keeps_each_replica_on_one_node_inside_one_nvlink_domain(tenant):
    pcie_only = "nv=;numa=" + ",".join(f"{card}:-" for card in range(8))
    two_domains = "nv=0-1,0-2,0-3,1-2,1-3,2-3,4-5,4-6,4-7,5-6,5-7,6-7;numa=" + ",".join(
        f"{card}:{card // 4}" for card in range(8))
    make_node(name="pcie", labels={TOPOLOGY_LABEL: pcie_only})
    make_node(name="pcie-2", labels={TOPOLOGY_LABEL: pcie_only})
    nvlink = make_node(name="nvlink", labels={TOPOLOGY_LABEL: two_domains})
    group = training_group(tenant, world_size=2, gpus_per_worker=4, parallelism="tensor")

    run_gangs()

    placed = members(group)
    assert {task.node_id for task in placed} == {nvlink.id}
    assert sorted(tuple(sorted(task.gpus)) for task in placed) == [(0, 1, 2, 3), (4, 5, 6, 7)]


def test_a_gang_is_left_alone_when_some_members_are_active(tenant):
    three_nodes()
    mixed = training_group(tenant, world_size=2, name="mixed")
    node = Node.objects.get(name="b")
    running = members(mixed)[1]
    Task.objects.filter(id=running.id).update(status=lifecycle.RUNNING, node=node, gpus=[0])

    results, _ = run_gangs()

    assert [(result.group_id, result.code) for result in results] == [(mixed.id, reasons.GANG_INCOMPLETE)]
    mixed.refresh_from_db()
    assert "1 of 2 members pending" in mixed.diagnostics["message"]


def test_the_gang_shares_the_single_binds_node_recheck(tenant):
    three_nodes()
    group = training_group(tenant, world_size=16)
    framework = Framework(build_plugin_set([]), SchedulerConfig.from_settings())
    snapshot = build_snapshot()
    # After the snapshot was taken, one rack-r1 node's CPU crossed the threshold.
    Node.objects.filter(name="a1").update(cpu_percent=99)

    results = schedule_groups(_waiting_group_ids(), snapshot, framework, random.Random(1))

    assert [result.code for result in results] == [reasons.LOAD_THRESHOLD_EXCEEDED]
    assert "node a1 CPU at 99 % (threshold 90 %)" in results[0].message
    assert {task.status for task in members(group)} == {lifecycle.PENDING}
