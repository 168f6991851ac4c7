"""The trace replay (design §15.9) on a small subset of the openb trace: every 25th node, all pods."""

from pathlib import Path

import pytest

from scheduling.framework.snapshot import ClusterSnapshot
from scheduling.plugins.fgd.workload import TargetWorkload
from scheduling.replay.simulate import POLICIES, Arrival, Replay, TraceReplay
from scheduling.replay.trace import MILLI, read_nodes, read_pods
from tests.scheduling.framework.builders import make_node, make_task

TRACE = Path(__file__).resolve().parents[3] / "data" / "traces" / "openb"
NODES = read_nodes(TRACE / "openb_node_list_gpu_node.csv")[::25]
PODS = read_pods(TRACE / "openb_pod_list_gpuspec33.csv")


def recount_allocated_percent(replay: TraceReplay) -> float:
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
    first = TraceReplay(NODES, PODS, policy=policy, seed=3).run()
    again = TraceReplay(NODES, PODS, policy=policy, seed=3).run()
    other = TraceReplay(NODES, PODS, policy=policy, seed=4).run()
    assert first == again
    assert first.curve != other.curve


@pytest.mark.parametrize("policy", ["binpack", "fgd"])
def test_allocation_ratio_equals_a_recount_of_the_final_snapshot(policy):
    replay = TraceReplay(NODES, PODS, policy=policy, seed=1)
    result = replay.run()
    assert result.allocation_at_arrival == pytest.approx(recount_allocated_percent(replay))
    assert result.failed_tasks > 0, "130 % arrival must overflow the cluster"
    assert len(replay.placements) == result.arrived_tasks - result.failed_tasks


def test_cpu_and_memory_requests_count_against_their_node():
    replay = TraceReplay(NODES, PODS, policy="spread", seed=2)
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
    replay = TraceReplay(NODES, PODS, policy="fgd", seed=5)
    replay.run()
    constrained = [(task, node_id) for task, node_id, _ in replay.placements if task.labels]
    assert constrained
    for task, node_id in constrained:
        models = task.labels["gpu-model"].lower().split("|")
        assert replay.snapshot.node(node_id).cards[0].model.lower() in models


def test_arrival_stops_before_the_demand_passes_the_target():
    replay = TraceReplay(NODES, PODS, policy="random", seed=0, arrival=0.5)
    demand = sum(arrival.demand_milli for arrival in replay.tasks())
    assert 0.5 * replay.capacity_milli - MILLI * 8 < demand <= 0.5 * replay.capacity_milli


def test_a_task_leaves_at_its_time_and_frees_its_cards_for_the_next():
    first = make_task(gpu_required=2)
    arrivals = [Arrival(first, 2 * MILLI, at=0, leaves_at=10),
                Arrival(make_task(gpu_required=1), MILLI, at=20),       # after the first left
                Arrival(make_task(gpu_required=2), 2 * MILLI, at=25),   # one card free: fails
                Arrival(make_task(gpu_required=1), MILLI, at=30)]
    replay = Replay(ClusterSnapshot(nodes=[make_node(cards=2)]), policy="binpack", seed=0,
                    workload=TargetWorkload.from_tasks([first]))
    result = replay.run(arrivals)
    assert (result.arrived_tasks, result.failed_tasks, result.allocation_at_arrival) == (4, 1, 100.0)
    assert result.curve == [(100.0, 100.0), (150.0, 50.0), (250.0, 50.0), (300.0, 100.0), (300.0, 100.0)]
    assert len(replay.placements) == 3


def test_a_shard_counts_its_share_of_the_card_it_got():
    shard = make_task(gpu_memory_mb=10000)
    replay = Replay(ClusterSnapshot(nodes=[make_node(cards=1, memory_mb=40000)]), policy="binpack", seed=0,
                    workload=TargetWorkload.from_tasks([shard]))
    # The arrived demand is the caller's estimate; what is allocated is the share of the card it got.
    result = replay.run([Arrival(shard, 999)])
    assert result.allocation_at_arrival == 25.0


def test_the_fgd_policy_is_the_plugin_as_an_admin_gets_it():
    # design §15.9: `--policy fgd` replays fgd with its registered defaults; `fgd-paper` is the paper's.
    from scheduling.plugins.fgd import SPEC, Fgd
    from scheduling.replay.simulate import plugin_set_for
    from scheduling.selectors import default_setting

    admins = SPEC.factory(default_setting(SPEC))
    replayed = {name: next(plugin for plugin, _ in plugin_set_for(name, TargetWorkload((), ())).scorers
                           if isinstance(plugin, Fgd)) for name in ("fgd", "fgd-paper")}
    settings = [(plugin.tie_break, plugin.cpu_weight, plugin.gap_weight, plugin.gap_horizon)
                for plugin in (replayed["fgd"], admins, replayed["fgd-paper"])]
    assert settings[0] == settings[1] == ("best-fit", 1.0, 3.0, 50.0)
    assert settings[2][:3] == ("none", 0.0, 0.0)
