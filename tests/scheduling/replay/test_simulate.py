"""The trace replay (SPEC §15.9) on a small subset of the openb trace: every 25th node, all pods."""

from pathlib import Path

import pytest

from scheduling.replay.simulate import POLICIES, Replay
from scheduling.replay.trace import MILLI, read_nodes, read_pods

TRACE = Path(__file__).resolve().parents[3] / "data" / "traces" / "openb"
NODES = read_nodes(TRACE / "openb_node_list_gpu_node.csv")[::25]
PODS = read_pods(TRACE / "openb_pod_list_gpuspec33.csv")


def recount_allocated_percent(replay: Replay) -> float:
    """GPU capacity held in the final snapshot, card by card: whole cards 1000 milli, shards their share."""
    milli = 0
    for node in replay.snapshot.nodes:
        for card in node.cards:
            if card.whole_card_tasks:
                milli += MILLI
            else:
                milli += card.shard_memory_mb * MILLI // card.memory_total_mb
    return 100.0 * milli / replay.capacity_milli


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_seed_replays_identically(policy):
    first = Replay(NODES, PODS, policy=policy, seed=3).run()
    again = Replay(NODES, PODS, policy=policy, seed=3).run()
    other = Replay(NODES, PODS, policy=policy, seed=4).run()
    assert first == again
    assert first.curve != other.curve


@pytest.mark.parametrize("policy", ["binpack", "fgd"])
def test_allocation_ratio_equals_a_recount_of_the_final_snapshot(policy):
    replay = Replay(NODES, PODS, policy=policy, seed=1)
    result = replay.run()
    assert result.allocation_at_arrival == pytest.approx(recount_allocated_percent(replay))
    assert result.failed_tasks > 0, "130 % arrival must overflow the cluster"
    assert len(replay.placements) == result.arrived_tasks - result.failed_tasks


def test_cpu_and_memory_requests_count_against_their_node():
    replay = Replay(NODES, PODS, policy="spread", seed=2)
    replay.run()
    requested: dict[int, list[float]] = {}
    for task, node_id, _ in replay.placements:
        cpu, memory = requested.setdefault(node_id, [0.0, 0.0])
        requested[node_id] = [cpu + task.cpu_cores, memory + task.memory_mb]
    for node in replay.snapshot.nodes:
        cpu, memory = requested.get(node.id, (0.0, 0.0))
        assert cpu <= node.cpu_cores + 1e-6
        assert memory <= node.memory_gb * 1024
        assert node.cpu_percent == pytest.approx(100 * cpu / node.cpu_cores)


def test_model_constrained_tasks_land_on_their_models():
    replay = Replay(NODES, PODS, policy="fgd", seed=5)
    replay.run()
    constrained = [(task, node_id) for task, node_id, _ in replay.placements if task.labels]
    assert constrained
    for task, node_id in constrained:
        models = task.labels["gpu-model"].lower().split("|")
        assert replay.snapshot.node(node_id).cards[0].model.lower() in models


def test_arrival_stops_before_the_demand_passes_the_target():
    replay = Replay(NODES, PODS, policy="random", seed=0, arrival=0.5)
    demand = sum(milli for _, milli in replay.tasks())
    assert 0.5 * replay.capacity_milli - MILLI * 8 < demand <= 0.5 * replay.capacity_milli
