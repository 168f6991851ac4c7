"""The gang planner and its parallelism paths, pure over an in-memory snapshot (no database)."""

import random
from collections import Counter

import pytest

from scheduling.framework import reasons
from scheduling.framework.framework import Framework
from scheduling.plugins import build_plugin_set
from scheduling.groups.gang import GangFailure, GangPlan, GroupInfo, plan_gang
from scheduling.groups.parallelism import ELSEWHERE, SAME_NODE, SAME_RACK, SAME_ZONE, member_slots, topology_affinity
from tests.scheduling.framework.builders import CONFIG, make_node, make_snapshot, make_task, occupy

FRAMEWORK = Framework(build_plugin_set([]), CONFIG)


def gang(world_size: int, *, cards: int = 1, parallelism: str = "coschedule", gpu_type: str = ""):
    group = GroupInfo(id=1, tenant_id=1, name="g", world_size=world_size, gpus_per_worker=cards,
                      gpu_type=gpu_type, parallelism=parallelism)
    members = [make_task(type="training", gpu_required=cards, gpu_type=gpu_type, group_id=1)
               for _ in range(world_size)]
    return group, members


def nodes_of(plan: GangPlan) -> list[str]:
    return [placement.node_name for placement in plan.placements]


def test_topology_affinity_ranks_node_rack_zone_and_elsewhere():
    base = make_node(region="eu", zone="z1", rack="r1")
    assert topology_affinity(base, base) == SAME_NODE
    assert topology_affinity(base, make_node(region="eu", zone="z1", rack="r1")) == SAME_RACK
    assert topology_affinity(base, make_node(region="eu", zone="z1", rack="r2")) == SAME_ZONE
    # A rack name repeated in another zone is another rack.
    assert topology_affinity(base, make_node(region="eu", zone="z2", rack="r1")) == ELSEWHERE
    assert topology_affinity(make_node(), make_node()) == ELSEWHERE


def test_member_slots_count_free_usable_cards_per_member():
    node = make_node(cards=8)
    occupy(node.cards[0], 1)
    node.gpu_used = 1
    node.cards[1].memory_used_mb = node.cards[1].memory_total_mb  # over the 95 % threshold

    assert member_slots(node, 2, CONFIG) == 3
    assert member_slots(node, 1, CONFIG) == 6


def test_planning_simulates_on_a_copy_and_never_counts_a_card_twice():
    first, second = make_node(cards=8, rack="r1"), make_node(cards=8, rack="r1")
    snapshot = make_snapshot(first, second)
    group, members = gang(16)

    plan = plan_gang(group, members, snapshot, FRAMEWORK, random.Random(1))

    assert isinstance(plan, GangPlan)
    assert [placement.rank for placement in plan.placements] == list(range(16))
    assert len({(placement.node_id, card) for placement in plan.placements for card in placement.cards}) == 16
    assert (first.gpu_used, second.gpu_used) == (0, 0)
    assert all(card.is_free for node in snapshot.nodes for card in node.cards)


def test_failure_names_the_first_member_without_a_place():
    snapshot = make_snapshot(make_node(cards=8), make_node(cards=4))
    group, members = gang(7, cards=2)

    failure = plan_gang(group, members, snapshot, FRAMEWORK, random.Random(1))

    assert isinstance(failure, GangFailure)
    assert (failure.code, failure.rank, failure.task_id) == (reasons.GANG_INCOMPLETE, 6, members[6].id)
    assert failure.reason == "0/2 nodes are available: 2 Insufficient GPU."


@pytest.mark.parametrize("parallelism", ["data", "coschedule", "tensor"])
def test_the_first_member_goes_where_the_whole_gang_can_follow(parallelism):
    # The lone node is emptiest (spread prefers it) but its rack cannot hold 12 members; rack r1 can.
    lone = make_node(name="lone", cards=8, rack="r2")
    left = make_node(name="left", cards=8, rack="r1", cpu_percent=40)
    right = make_node(name="right", cards=8, rack="r1", cpu_percent=40)
    group, members = gang(12, parallelism=parallelism)

    plan = plan_gang(group, members, make_snapshot(lone, left, right), FRAMEWORK, random.Random(1))

    assert set(nodes_of(plan)) == {"left", "right"}
    assert nodes_of(plan)[:8] == [nodes_of(plan)[0]] * 8  # fills one node before opening the next


def test_data_parallel_prefers_one_network_domain_over_rack_neighbours():
    zone = {"heteroflow.network_zone": "dc1"}
    seed = make_node(name="seed", cards=4, rack="r1", labels=zone)
    rack_mate = make_node(name="rack-mate", cards=4, rack="r1", labels={"heteroflow.network_zone": "dc2"})
    same_domain = make_node(name="same-domain", cards=4, rack="r9", labels=zone)
    group, members = gang(8, parallelism="data")

    plan = plan_gang(group, members, make_snapshot(seed, rack_mate, same_domain), FRAMEWORK, random.Random(1))

    assert Counter(nodes_of(plan)) == {"seed": 4, "same-domain": 4}


def test_greedy_takes_the_largest_nodes_first():
    snapshot = make_snapshot(*(make_node(name=f"small-{i}", cards=2) for i in range(4)), make_node(name="big", cards=8))
    group, members = gang(10, parallelism="greedy")

    plan = plan_gang(group, members, snapshot, FRAMEWORK, random.Random(1))

    assert nodes_of(plan)[:8] == ["big"] * 8
    assert len(set(nodes_of(plan))) == 2


def test_pipeline_walks_the_nodes_of_one_rack_in_order_before_crossing():
    snapshot = make_snapshot(*(make_node(name=name, cards=1, zone="z", rack=rack)
                               for name, rack in (("c", "r2"), ("a", "r1"), ("d", "r2"), ("b", "r1"))))
    group, members = gang(4, parallelism="pipeline")

    plan = plan_gang(group, members, snapshot, FRAMEWORK, random.Random(1))

    assert nodes_of(plan) == ["a", "b", "c", "d"]


def test_strict_gpu_type_keeps_out_nodes_that_never_reported_their_cards():
    # gpu-filter lets a silent node pass; a gang that declares its type does not bet on it.
    silent = make_node(name="silent", cards=0)
    silent.gpu_total = 8
    ascend = make_node(name="ascend", cards=8, gpu_type="ascend")
    group, members = gang(2, cards=0, gpu_type="ascend")

    plan = plan_gang(group, members, make_snapshot(silent, ascend), FRAMEWORK, random.Random(1))

    assert nodes_of(plan) == ["ascend", "ascend"]
