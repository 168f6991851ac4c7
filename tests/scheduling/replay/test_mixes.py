"""Trace mixes (`replay_trace --mix`, design §15.9): the proportions asked for, drawn from the trace's own pods,
the same for the same seed."""

from pathlib import Path

import pytest

from scheduling.replay.mixes import Mix, mixed_pods
from scheduling.replay.trace import TraceError, read_nodes, read_pods

TRACE = Path(__file__).resolve().parents[3] / "data" / "traces" / "openb"
NODES = read_nodes(TRACE / "openb_node_list_gpu_node.csv")
PODS = read_pods(TRACE / "openb_pod_list_default.csv")


def shares(pods) -> dict[str, float]:
    gpu = [pod for pod in pods if pod.gpu_demand_milli]
    return {"shared": sum(pod.shared for pod in gpu) / len(gpu),
            "multi": sum(not pod.shared and pod.num_gpu >= 2 for pod in gpu) / len(gpu),
            "constrained": sum(bool(pod.gpu_spec) for pod in gpu) / len(gpu)}


def test_a_mix_has_the_proportions_asked_for_and_keeps_the_pods_without_gpus():
    mixed = mixed_pods(PODS, NODES, Mix.parse("shared=0.6,multi=0.1,constrained=0.3"))

    assert len(mixed) == len(PODS) and [pod.name for pod in mixed] == [pod.name for pod in PODS]
    assert [pod for pod in mixed if not pod.gpu_demand_milli] == [pod for pod in PODS if not pod.gpu_demand_milli]
    assert shares(mixed) == pytest.approx({"shared": 0.6, "multi": 0.1, "constrained": 0.3}, abs=0.02)
    # Every drawn pod is one of the trace's (CPU, memory and cards as there), the constraint apart.
    shapes = {(pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli) for pod in PODS}
    assert all((pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli) in shapes for pod in mixed)


def test_a_constraint_names_a_model_whose_nodes_hold_the_pods_cards():
    mixed = mixed_pods(PODS, NODES, Mix.parse("multi=0.2,constrained=1"))
    largest = {}
    for node in NODES:
        largest[node.model] = max(largest.get(node.model, 0), node.gpus)

    assert all(pod.gpu_spec and largest[pod.gpu_spec] >= pod.num_gpu for pod in mixed if pod.gpu_demand_milli)


def test_the_same_seed_gives_the_same_mix_and_another_seed_another():
    mix = Mix.parse("shared=0.5,seed=3")
    assert mixed_pods(PODS, NODES, mix) == mixed_pods(PODS, NODES, mix)
    assert mixed_pods(PODS, NODES, mix) != mixed_pods(PODS, NODES, Mix.parse("shared=0.5,seed=4"))


@pytest.mark.parametrize("text, message", [
    ("", "give at least one of shared, multi, constrained"),
    ("seed=1", "give at least one of"),
    ("shared=1.5", "shared must be a fraction from 0 to 1"),
    ("multi=lots", "multi must be a number"),
    ("gpus=0.5", "'gpus=0.5' is not one of shared, multi, constrained, seed"),
])
def test_a_bad_mix_is_refused_with_its_reason(text, message):
    with pytest.raises(TraceError, match=message):
        Mix.parse(text)
