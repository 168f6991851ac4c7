"""`replay_trace --bound` (design §15.9): the LP upper bound equals the optimum on hand-made cases where it is known,
and no policy's allocation passes it."""

import pytest

from scheduling.replay.bound import allocation_bound
from scheduling.replay.simulate import POLICIES, Arrival, TraceReplay
from scheduling.replay.trace import TraceNode, TracePod, to_task


def node(name: str, gpus: int, *, cpu: int = 96, model: str = "G2") -> TraceNode:
    return TraceNode(name, cpu * 1000, 512 * 1024, gpus, model)


def pod(name: str, cards: int = 1, *, cpu: int = 4, milli: int = 1000, spec: str = "") -> TracePod:
    return TracePod(name, cpu * 1000, 4096, cards, milli if cards == 1 else 1000, spec)


CASES = {
    # three 4-card tasks for 8 cards: two fit, the node is full.
    "more demand than cards": ([node("a", 8)], [pod(f"p{i}", 4) for i in range(3)], 100.0),
    # two 1-card tasks that each need all 8 cores: one node of 2 cards holds only one.
    "CPU strands a card": ([node("a", 2, cpu=8)], [pod("p1", cpu=8), pod("p2", cpu=8)], 50.0),
    # both tasks accept only A10 cards; the T4 card stays idle.
    "model constraint": ([node("a", 1, model="A10"), node("b", 1, model="T4")],
                         [pod("p1", spec="A10"), pod("p2", spec="A10")], 50.0),
    # an 8-card task fits no 4-card node; the two 1-card tasks do.
    "too big for any node": ([node("a", 4), node("b", 4)], [pod("big", 8), pod("p1"), pod("p2")], 25.0),
    # two 4-card tasks cannot share one 6-card node, though 8 ≤ 12 cards in all.
    "per-node packing of big tasks": ([node("a", 6), node("b", 6)], [pod(f"p{i}", 4) for i in range(3)],
                                      100.0 * 8 / 12),
    # shards: 0.5 + 0.5 fill one card, 0.7 takes the other.
    "shards": ([node("a", 2)], [pod("s1", milli=500), pod("s2", milli=500), pod("s3", milli=700)], 85.0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_bound_is_the_known_optimum_and_no_policy_passes_it(case):
    nodes, pods, optimum = CASES[case]

    bound = allocation_bound(nodes, pods)

    assert bound == pytest.approx(optimum, abs=1e-6)
    arrivals = [Arrival(to_task(item, index + 1), item.gpu_demand_milli) for index, item in enumerate(pods)]
    for policy in POLICIES:
        reached = TraceReplay(nodes, pods, policy=policy, seed=0).run(arrivals).allocation_at_arrival
        assert reached <= bound + 1e-6, policy


def test_tasks_without_gpus_add_nothing():
    assert allocation_bound([node("a", 2)], [pod("cpu-only", 0)]) == 0.0
