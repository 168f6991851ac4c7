"""design §17.2: the agent reports each autoscaled replica's metric with its heartbeat — parsed from the replica's
Prometheus text `/metrics`, or the vendor tool's utilisation of its cards — and the simulated runtime's stand-ins
serve an even share of a load a test (or the demo, or `bench_autoscale`) drives."""

import time

from nodes.agent.detectors.base import Card
from nodes.agent.replica_metrics import gpu_utilization, prometheus_value
from nodes.agent.runtime import Metric, SimulatedRuntime, TaskSpec
from tests.agent.test_agent import FakeRuntime, events, make_agent, plane, sleeps, start_item  # noqa: F401

PROMETHEUS_TEXT = """\
# HELP vllm_requests_per_second Requests served per second.
# TYPE vllm_requests_per_second gauge
vllm_requests_per_second{model="qwen",route="/v1/completions"} 12.5
vllm_requests_per_second{model="qwen",route="/v1/chat"} 7.5 1733370000000
vllm_requests_per_second_total 999
vllm_queue_length NaN
vllm_queue_length 3
"""


def test_prometheus_text_sums_every_label_set_of_the_named_metric_only():
    assert prometheus_value(PROMETHEUS_TEXT, "vllm_requests_per_second") == 20.0
    assert prometheus_value(PROMETHEUS_TEXT, "vllm_queue_length") == 3.0
    assert prometheus_value(PROMETHEUS_TEXT, "absent") is None
    assert prometheus_value("not prometheus at all {", "not") is None


def test_gpu_utilization_is_the_mean_of_the_replicas_cards():
    cards = [Card(index=i, uuid=f"u{i}", type="nvidia", model="A100", memory_total_mb=1, memory_used_mb=0,
                  utilization=u, temperature=None) for i, u in enumerate([90, 50, 10])]
    assert gpu_utilization(cards, "nvidia", [0, 1]) == 70.0
    assert gpu_utilization(cards, "ascend", [0]) is None


def _serving(runtime, task_id, load_file):
    spec = TaskSpec(id=task_id, image="vllm", command="", kind="inference",
                    env={"HETEROFLOW_SIM_LOAD_FILE": str(load_file), "HETEROFLOW_SIM_READY_SECONDS": "0"},
                    metric=Metric("requests_per_second", "vllm_rps"))
    return spec, runtime.start(spec)


def _value(runtime, handle, spec, *, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = runtime.metrics_text(handle, spec)
        if text is not None:
            return prometheus_value(text, "vllm_rps")
        time.sleep(0.05)
    return None


def test_simulated_replicas_share_the_driven_load_evenly(tmp_path):
    load = tmp_path / "svc.load"
    load.write_text("90")
    runtime = SimulatedRuntime()
    first = _serving(runtime, 71, load)
    assert _value(runtime, first[1], first[0]) == 90.0
    second = _serving(runtime, 72, load)
    _value(runtime, second[1], second[0])
    assert _value(runtime, first[1], first[0]) == 45.0
    load.write_text("30")
    assert _value(runtime, second[1], second[0]) == 15.0
    runtime.stop(second[1], 0)
    deadline = time.monotonic() + 10
    while _value(runtime, first[1], first[0]) != 30.0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _value(runtime, first[1], first[0]) == 30.0
    runtime.stop(first[1], 0)


class MeteredRuntime(FakeRuntime):
    def metrics_text(self, handle, spec):
        return "vllm_rps 4.25\n"


def test_the_heartbeat_carries_each_autoscaled_replicas_metric(plane, events, sleeps):  # noqa: F811
    plane.work = {"start": [start_item(5, type="inference", metric={"metric": "requests_per_second",
                                                                      "name": "vllm_rps"}),
                            start_item(6, gpus=[1], type="inference",
                                       metric={"metric": "gpu_utilization", "name": "gpu_utilization"}),
                            start_item(7, type="inference")], "stop": []}
    agent = make_agent(plane, MeteredRuntime(events), sleeps)
    agent.run_once()
    plane.work = {"start": [], "stop": []}
    agent.run_once()
    heartbeat = [request for request in plane.requests if request["path"] == "/api/v1/agent/heartbeat"][-1]
    utilization = next(card for card in heartbeat["body"]["gpus"] if card["index"] == 1)["utilization"]
    assert heartbeat["body"]["metrics"] == [{"task": 5, "value": 4.25}, {"task": 6, "value": float(utilization)}]
