"""The agent loop against a tiny fake control plane served by http.server on 127.0.0.1."""

import json
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nodes.agent.agent import GPU_TYPE_LABEL, Agent, default_pool_size
from nodes.artifacts_label import IMAGES_LABEL, MODELS_LABEL
from nodes.agent.client import AgentClient, AgentRequestError, RetryPolicy, ServerUnavailable
from nodes.agent.detectors import fake_cards_for
from nodes.agent.runtime import SimulatedRuntime
from nodes.agent.topology import TOPOLOGY_LABEL, GpuTopology

STATUS_PREFIX = "/api/v1/agent/tasks/"


class FakeControlPlane:
    """Records every request in ``events`` and answers from per-route scripts (200 once a script runs out)."""

    def __init__(self, events: list):
        self.events = events
        self.requests: list[dict] = []
        self.work = {"start": [], "stop": []}
        self.heartbeat_codes: list[int] = []
        self.kill: list[int] = []
        self.status_codes: dict[int, list[int]] = defaultdict(list)
        self.always_failing_status = False
        self.always_failing_logs = False
        plane = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                plane.handle(self, None)

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                plane.handle(self, body if self.path.endswith("/logs") else json.loads(body))

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def handle(self, request: BaseHTTPRequestHandler, body):
        self.requests.append({"method": request.command, "path": request.path, "body": body,
                              "authorization": request.headers.get("Authorization")})
        code, answer = 200, {}
        if request.path == "/api/v1/agent/heartbeat":
            code = self.heartbeat_codes.pop(0) if self.heartbeat_codes else 200
            answer = {"node_id": 1, "status": "online", "kill": self.kill}
        elif request.path.split("?")[0] == "/api/v1/agent/work":
            answer = self.work
        elif request.path.startswith(STATUS_PREFIX) and request.path.endswith("/logs"):
            task_id = int(request.path[len(STATUS_PREFIX):].split("/")[0])
            code = 503 if self.always_failing_logs else 200
            self.events.append(("logs", task_id, body, code))
        elif request.path.startswith(STATUS_PREFIX):
            task_id = int(request.path[len(STATUS_PREFIX):].split("/")[0])
            scripted = self.status_codes[task_id]
            code = 503 if self.always_failing_status else (scripted.pop(0) if scripted else 200)
            self.events.append(("status", task_id, body["from"], body["to"], body.get("reason"), code))
        else:
            code = 404
        payload = json.dumps(answer).encode()
        request.send_response(code)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(payload)))
        request.end_headers()
        request.wfile.write(payload)

    def paths(self) -> list[str]:
        return [request["path"] for request in self.requests]


class FakeRuntime:
    def __init__(self, events: list, left_running: dict[int, int] | None = None):
        self.events = events
        self.exit_codes: dict[int, int] = {}
        self.left_running = dict(left_running or {})
        # What each task prints next (read once), and the handles released.
        self.output: dict[int, bytes] = {}
        self.released: list[int] = []
        # The grace each stop gave, and the tasks that go on after their SIGTERM (saving a checkpoint) until killed.
        self.graces: dict[int, int] = {}
        self.ignores_sigterm: set[int] = set()

    def start(self, spec):
        self.events.append(("start", spec.id, spec.gpus))
        return spec.id

    def poll(self, handle):
        return self.exit_codes.get(handle)

    def stop(self, handle, grace_seconds):
        self.events.append(("stop", handle))
        self.graces[handle] = grace_seconds
        if handle not in self.ignores_sigterm:
            self.exit_codes[handle] = 143

    def kill(self, handle):
        self.events.append(("kill", handle))
        self.exit_codes[handle] = 137

    def read_output(self, handle):
        return self.output.pop(handle, b"")

    def release(self, handle):
        self.released.append(handle)

    def adopt(self):
        return self.left_running

    def images(self):
        return []

    def probe(self, handle, spec):
        return True


TOPOLOGY = GpuTopology(links=frozenset({(0, 1)}), numa={0: 0, 1: 1}, cards=(0, 1))


@pytest.fixture
def events():
    return []


@pytest.fixture
def plane(events):
    control_plane = FakeControlPlane(events)
    control_plane.thread.start()
    yield control_plane
    control_plane.server.shutdown()
    control_plane.server.server_close()


@pytest.fixture
def sleeps():
    return []


def make_agent(plane, runtime, sleeps, attempts=3, clock=time.monotonic):
    client = AgentClient(plane.url, "node-token", retry=RetryPolicy(attempts=attempts, base_delay=0.01),
                         sleep=sleeps.append)
    cards = fake_cards_for("nvidia", "NVIDIA A100-SXM4-80GB", 2, 81920)
    return Agent(client, runtime, card_source=lambda: cards, topology_source=lambda: TOPOLOGY, workers=2,
                 cpu_percent=lambda: 12.5, memory_used=lambda: 2048, clock=clock)


def start_item(task_id, **extra):
    return {"id": task_id, "image": "busybox", "command": "sleep 1", "gpus": [0], "port": None, "env": {}, **extra}


def test_heartbeat_carries_cards_labels_and_node_token(plane, events, sleeps):
    agent = make_agent(plane, FakeRuntime(events), sleeps)
    agent.run_once()
    heartbeat = plane.requests[0]
    assert (heartbeat["method"], heartbeat["path"], heartbeat["authorization"]) == \
        ("POST", "/api/v1/agent/heartbeat", "Token node-token")
    body = heartbeat["body"]
    assert (body["cpu_percent"], body["memory_used_mb"]) == (12.5, 2048)
    assert body["labels"] == {TOPOLOGY_LABEL: "nv=0-1;numa=0:0,1:1", GPU_TYPE_LABEL: "nvidia"}
    assert [set(gpu) for gpu in body["gpus"]] == [
        {"index", "uuid", "type", "model", "memory_total_mb", "memory_used_mb", "utilization", "temperature", "numa",
         "health", "errors"}
    ] * 2
    # Fake cards have no vendor tool to read health from: they report healthy.
    assert [(gpu["health"], gpu["errors"]) for gpu in body["gpus"]] == [("ok", [])] * 2
    # nvidia-smi --query-gpu has no NUMA column: the topology fills it in.
    assert [gpu["numa"] for gpu in body["gpus"]] == [0, 1]
    assert plane.paths() == ["/api/v1/agent/heartbeat", "/api/v1/agent/work"]
    agent.close()


def test_heartbeat_carries_each_cards_health_from_its_vendors_reading(plane, events, sleeps):
    from nodes.agent.health import CardHealth, HealthError, HealthReport

    agent = make_agent(plane, FakeRuntime(events), sleeps)
    many = tuple(HealthError("xid-94", "x" * 600, None) for _ in range(20))
    agent.health_source = lambda cards: {"nvidia": HealthReport((CardHealth(1, "failed", many),))}
    agent.run_once()
    gpus = plane.requests[0]["body"]["gpus"]
    assert [gpu["health"] for gpu in gpus] == ["ok", "failed"]
    assert len(gpus[1]["errors"]) == 16 and len(gpus[1]["errors"][0]["message"]) == 500
    agent.close()


def test_a_vendor_tool_that_cannot_reach_the_cards_fails_every_card_of_that_vendor(plane, events, sleeps):
    from nodes.agent.health import HealthReport

    agent = make_agent(plane, FakeRuntime(events), sleeps)
    agent.health_source = lambda cards: {"nvidia": HealthReport.tool_failure("Failed to initialize NVML")}
    agent.run_once()
    gpus = plane.requests[0]["body"]["gpus"]
    assert [gpu["health"] for gpu in gpus] == ["failed", "failed"]
    assert gpus[0]["errors"][0]["code"] == "tool-failure"
    agent.close()


def test_claims_before_starting_and_skips_a_lost_claim(plane, events, sleeps):
    runtime = FakeRuntime(events)
    agent = make_agent(plane, runtime, sleeps)
    plane.work = {"start": [start_item(1, gpus=[0, 1]), start_item(2)], "stop": []}
    plane.status_codes[2] = [409]
    agent.run_once()

    assert events.index(("status", 1, "scheduled", "running", None, 200)) < events.index(("start", 1, (0, 1)))
    assert ("status", 2, "scheduled", "running", None, 409) in events
    assert not [event for event in events if event[0] == "start" and event[1] == 2]
    assert [event for event in events if event[1] == 2] == [("status", 2, "scheduled", "running", None, 409)]
    agent.close()


def test_exits_are_reported_as_succeeded_or_failed(plane, events, sleeps):
    runtime = FakeRuntime(events)
    agent = make_agent(plane, runtime, sleeps)
    plane.work = {"start": [start_item(1), start_item(2)], "stop": []}
    agent.run_once()
    plane.work = {"start": [], "stop": []}
    runtime.exit_codes.update({1: 0, 2: 137})
    agent.run_once()
    assert ("status", 1, "running", "succeeded", None, 200) in events
    assert ("status", 2, "running", "failed", "exit code 137", 200) in events
    events.clear()
    agent.run_once()  # reported once only
    assert not [event for event in events if event[0] == "status"]
    agent.close()


def test_stop_items_stop_the_container_then_settle_the_task(plane, events, sleeps):
    runtime = FakeRuntime(events)
    agent = make_agent(plane, runtime, sleeps)
    plane.work = {"start": [start_item(1), start_item(2)], "stop": []}
    agent.run_once()
    plane.work = {"start": [], "stop": [{"id": 1, "status": "preempting"}, {"id": 2, "status": "stopping"}]}
    agent.run_once()
    assert events.index(("stop", 1)) < events.index(("status", 1, "preempting", "pending", None, 200))
    assert events.index(("stop", 2)) < events.index(("status", 2, "stopping", "stopped", None, 200))
    agent.close()


class MovedClock:
    """The agent's clock, moved by the test: no real waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_task_with_grace_30_is_killed_only_after_30_seconds_and_the_step_never_waits(plane, events, sleeps):
    """design §17.1: SIGTERM, then SIGKILL once the task's grace has run out on the agent's clock; meanwhile each
    step goes on (heartbeats included) and the container still counts as running here."""
    runtime, clock = FakeRuntime(events), MovedClock()
    agent = make_agent(plane, runtime, sleeps, clock=clock)
    plane.work = {"start": [start_item(1)], "stop": []}
    agent.run_once()
    runtime.ignores_sigterm.add(1)
    plane.work = {"start": [], "stop": [{"id": 1, "status": "preempting", "grace_seconds": 30}]}
    events.clear()

    agent.run_once()
    clock.now += 29.9
    agent.run_once()  # listed again while its grace runs: stopped once only

    assert events == [("stop", 1)] and runtime.graces == {1: 30}
    assert last_heartbeat(plane)["running"] == [1]
    clock.now += 0.1
    agent.run_once()
    assert events == [("stop", 1), ("kill", 1), ("status", 1, "preempting", "pending", None, 200)]
    assert runtime.released == [1]
    agent.close()


def test_a_task_that_stops_within_its_grace_is_not_killed(plane, events, sleeps):
    runtime, clock = FakeRuntime(events), MovedClock()
    agent = make_agent(plane, runtime, sleeps, clock=clock)
    plane.work = {"start": [start_item(1)], "stop": []}
    agent.run_once()
    runtime.ignores_sigterm.add(1)
    plane.work = {"start": [], "stop": [{"id": 1, "status": "stopping", "grace_seconds": 30}]}
    agent.run_once()
    runtime.exit_codes[1] = 143  # its checkpoint saved, it exits
    clock.now += 12
    agent.run_once()
    assert ("kill", 1) not in events
    assert ("status", 1, "stopping", "stopped", None, 200) in events
    agent.close()


def test_the_simulated_runtime_sends_sigterm_then_sigkill_once_the_grace_ran_out(plane, events, sleeps):
    """A stand-in that needs a minute to save its checkpoint, given 30 s: still running at 29 s of the agent's
    clock, killed at 30 s (its output says it got the SIGTERM)."""
    runtime, clock = SimulatedRuntime(), MovedClock()
    agent = make_agent(plane, runtime, sleeps, clock=clock)
    plane.work = {"start": [start_item(4, env={"HETEROFLOW_SIM_SECONDS": "120", "HETEROFLOW_SIM_STOP_SECONDS": "60"})],
                  "stop": []}
    agent.run_once()
    plane.work = {"start": [], "stop": []}
    deadline = time.monotonic() + 10
    while not log_events(events) and time.monotonic() < deadline:  # once it prints, its SIGTERM handler is set
        time.sleep(0.05)
        agent.run_once()
    handle = agent._running[4]
    plane.work = {"start": [], "stop": [{"id": 4, "status": "stopping", "grace_seconds": 30}]}

    agent.run_once()
    clock.now += 29
    time.sleep(0.3)
    agent.run_once()
    assert handle.popen.poll() is None and ("status", 4, "stopping", "stopped", None, 200) not in events

    clock.now += 1
    agent.run_once()
    assert handle.popen.returncode == -9
    assert ("status", 4, "stopping", "stopped", None, 200) in events
    assert "received SIGTERM" in b"".join(event[2] for event in log_events(events)).decode()
    agent.close()


def test_a_victim_that_ended_by_itself_is_reported_preempted_with_its_exit_code(plane, events, sleeps):
    """design §16.1: a preemption victim is never reported `succeeded`; a clean exit before the stop is
    `preempting → pending` with the exit code on the timeline, a crash `preempting → failed`."""
    runtime = FakeRuntime(events)
    agent = make_agent(plane, runtime, sleeps)
    plane.work = {"start": [start_item(1), start_item(2)], "stop": []}
    agent.run_once()
    runtime.exit_codes.update({1: 0, 2: 3})
    plane.work = {"start": [], "stop": [{"id": 1, "status": "preempting"}, {"id": 2, "status": "preempting"}]}
    events.clear()
    agent.run_once()
    reports = sorted(event for event in events if event[0] == "status")
    assert reports == [
        ("status", 1, "preempting", "pending",
         "preempted: the container ended by itself before its stop took effect, exit code 0", 200),
        ("status", 2, "preempting", "failed", "exit code 3", 200),
    ]
    assert ("stop", 1) not in events and ("stop", 2) not in events
    agent.close()


def test_retries_with_exponential_backoff_on_503_then_succeeds(plane, events, sleeps):
    agent = make_agent(plane, FakeRuntime(events), sleeps, attempts=4)
    plane.heartbeat_codes = [503, 503]
    agent.run_once()
    assert plane.paths() == ["/api/v1/agent/heartbeat"] * 3 + ["/api/v1/agent/work"]
    assert sleeps == [0.01, 0.02]
    agent.close()


def test_reports_held_during_an_outage_are_sent_first_afterwards(plane, events, sleeps):
    runtime = FakeRuntime(events)
    agent = make_agent(plane, runtime, sleeps, attempts=2)
    plane.work = {"start": [start_item(1)], "stop": []}
    agent.run_once()
    plane.work = {"start": [], "stop": []}
    runtime.exit_codes[1] = 0
    plane.always_failing_status = True
    agent.run_once()  # the report fails every retry and is kept
    plane.always_failing_status = False
    plane.requests.clear()
    agent.run_once()
    assert plane.paths()[:2] == ["/api/v1/agent/tasks/1/status", "/api/v1/agent/heartbeat"]
    assert events[-1] == ("status", 1, "running", "succeeded", None, 200)
    agent.close()


def test_a_lost_cas_on_a_final_report_is_accepted_silently(plane, events, sleeps):
    runtime = FakeRuntime(events)
    agent = make_agent(plane, runtime, sleeps)
    plane.work = {"start": [start_item(1)], "stop": []}
    agent.run_once()
    plane.work = {"start": [], "stop": []}
    runtime.exit_codes[1] = 0
    plane.status_codes[1] = [409]
    agent.run_once()
    agent.run_once()
    assert [event for event in events if event[:4] == ("status", 1, "running", "succeeded")] == \
        [("status", 1, "running", "succeeded", None, 409)]
    agent.close()


def test_unreachable_server_raises_after_retries(sleeps, events):
    client = AgentClient("http://127.0.0.1:9", "node-token", retry=RetryPolicy(attempts=3, base_delay=0.01),
                         sleep=sleeps.append)
    agent = Agent(client, FakeRuntime(events), card_source=list, topology_source=lambda: None, workers=2,
                  cpu_percent=lambda: 0.0, memory_used=lambda: 0)
    with pytest.raises(ServerUnavailable):
        agent.run_once()
    assert sleeps == [0.01, 0.02]
    agent.close()


def test_simulated_task_runs_to_completion(plane, events, sleeps):
    agent = make_agent(plane, SimulatedRuntime(), sleeps)
    plane.work = {"start": [start_item(7, env={"HETEROFLOW_SIM_SECONDS": "0.2", "HETEROFLOW_SIM_EXIT_CODE": "4"})],
                  "stop": []}
    agent.run_once()
    plane.work = {"start": [], "stop": []}
    deadline = time.monotonic() + 10
    while ("status", 7, "running", "failed", "exit code 4", 200) not in events and time.monotonic() < deadline:
        time.sleep(0.1)
        agent.run_once()
    assert ("status", 7, "running", "failed", "exit code 4", 200) in events
    agent.close()


@pytest.mark.parametrize(("cores", "size"), [(1, 2), (2, 2), (8, 4), (64, 32), (256, 32)])
def test_worker_pool_size(cores, size):
    assert default_pool_size(cores) == size


def test_a_rejected_token_is_not_retried(plane, events, sleeps):
    agent = make_agent(plane, FakeRuntime(events), sleeps)
    plane.heartbeat_codes = [401]
    with pytest.raises(AgentRequestError):
        agent.run_once()
    assert plane.paths() == ["/api/v1/agent/heartbeat"]
    assert sleeps == []
    agent.close()


def last_heartbeat(plane) -> dict:
    return [request for request in plane.requests if request["path"] == "/api/v1/agent/heartbeat"][-1]["body"]


def test_heartbeat_lists_the_running_tasks_and_kills_what_the_server_says_without_a_report(plane, events, sleeps):
    runtime = FakeRuntime(events)
    agent = make_agent(plane, runtime, sleeps)
    plane.work = {"start": [start_item(1), start_item(2)], "stop": []}
    agent.run_once()
    plane.work = {"start": [], "stop": []}
    plane.kill = [2, 99]
    events.clear()

    agent.run_once()

    assert last_heartbeat(plane)["running"] == [1, 2]
    assert events == [("stop", 2)]  # 99 is not ours: nothing to kill, nothing to report
    plane.kill = []
    agent.run_once()
    assert last_heartbeat(plane)["running"] == [1]
    assert [event for event in events if event[0] == "status"] == []
    agent.close()


def test_a_restarted_agent_adopts_what_its_runtime_still_runs(plane, events, sleeps):
    runtime = FakeRuntime(events, left_running={5: 5, 6: 6})
    agent = make_agent(plane, runtime, sleeps)
    agent.run_once()
    assert plane.requests[0]["body"]["running"] == [5, 6]

    runtime.exit_codes[6] = 0
    agent.run_once()
    assert ("status", 6, "running", "succeeded", None, 200) in events
    agent.run_once()
    assert last_heartbeat(plane)["running"] == [5]
    agent.close()


def log_events(events: list) -> list:
    return [event for event in events if event[0] == "logs"]


def test_running_output_is_shipped_each_step_and_the_last_before_the_status(plane, events, sleeps):
    runtime = FakeRuntime(events)
    agent = make_agent(plane, runtime, sleeps)
    plane.work = {"start": [start_item(1), start_item(2)], "stop": []}
    runtime.output = {1: b"epoch 1 loss 2.3\n"}
    agent.run_once()
    plane.work = {"start": [], "stop": []}
    assert log_events(events) == [("logs", 1, b"epoch 1 loss 2.3\n", 200)]
    agent.run_once()  # nothing new printed: nothing sent
    assert len(log_events(events)) == 1
    runtime.output = {1: b"epoch 2 loss 1.9\nfinished\n"}
    runtime.exit_codes[1] = 0
    agent.run_once()
    assert events.index(("logs", 1, b"epoch 2 loss 1.9\nfinished\n", 200)) < \
        events.index(("status", 1, "running", "succeeded", None, 200))
    assert runtime.released == [1]
    agent.close()


def test_a_stopped_task_ships_its_last_words_then_is_released(plane, events, sleeps):
    runtime = FakeRuntime(events)
    agent = make_agent(plane, runtime, sleeps)
    plane.work = {"start": [start_item(3)], "stop": []}
    agent.run_once()
    plane.work = {"start": [], "stop": [{"id": 3, "status": "stopping"}]}
    runtime.output = {3: b"received SIGTERM\n"}
    agent.run_once()
    assert events.index(("stop", 3)) < events.index(("logs", 3, b"received SIGTERM\n", 200)) < \
        events.index(("status", 3, "stopping", "stopped", None, 200))
    assert runtime.released == [3]
    agent.close()


def test_output_held_in_an_outage_goes_out_first_and_in_order(plane, events, sleeps):
    runtime = FakeRuntime(events)
    agent = make_agent(plane, runtime, sleeps, attempts=2)
    plane.work = {"start": [start_item(1)], "stop": []}
    agent.run_once()
    plane.work = {"start": [], "stop": []}
    plane.always_failing_logs = plane.always_failing_status = True
    runtime.output = {1: b"line 1\n"}
    agent.run_once()
    runtime.output = {1: b"line 2\n"}
    runtime.exit_codes[1] = 0
    agent.run_once()
    plane.always_failing_logs = plane.always_failing_status = False
    plane.requests.clear()
    agent.run_once()
    assert plane.paths()[:2] == ["/api/v1/agent/tasks/1/logs", "/api/v1/agent/tasks/1/status"]
    assert [event for event in log_events(events) if event[3] == 200] == [("logs", 1, b"line 1\nline 2\n", 200)]
    agent.close()


def test_output_is_sent_in_bounded_batches_and_held_output_is_bounded(plane, events, sleeps):
    from nodes.agent import log_shipping

    runtime = FakeRuntime(events)
    agent = make_agent(plane, runtime, sleeps)
    plane.work = {"start": [start_item(1)], "stop": []}
    runtime.output = {1: b"x" * (log_shipping.BATCH_BYTES * 2 + 10)}
    agent.run_once()
    assert [len(event[2]) for event in log_events(events)] == [log_shipping.BATCH_BYTES] * 2 + [10]
    shipper = log_shipping.LogShipper(agent.client)
    shipper.add(9, b"a" * log_shipping.HELD_BYTES)
    shipper.add(9, b"b")
    assert shipper._held[9][-2:] == b"ab" and len(shipper._held[9]) == log_shipping.HELD_BYTES
    agent.close()


def test_a_killed_task_ships_nothing_more_and_is_released(plane, events, sleeps):
    runtime = FakeRuntime(events)
    agent = make_agent(plane, runtime, sleeps)
    plane.work = {"start": [start_item(2)], "stop": []}
    agent.run_once()
    plane.work = {"start": [], "stop": []}
    plane.kill = [2]
    runtime.output = {2: b"late line\n"}
    agent.run_once()
    assert log_events(events) == []
    assert runtime.released == [2]
    agent.close()


def test_simulated_training_prints_progress_that_reaches_the_server(plane, events, sleeps):
    agent = make_agent(plane, SimulatedRuntime(), sleeps)
    plane.work = {"start": [start_item(8, type="training", env={"HETEROFLOW_SIM_SECONDS": "0.6"})], "stop": []}
    agent.run_once()
    plane.work = {"start": [], "stop": []}
    deadline = time.monotonic() + 10
    while ("status", 8, "running", "succeeded", None, 200) not in events and time.monotonic() < deadline:
        time.sleep(0.1)
        agent.run_once()
    shipped = b"".join(event[2] for event in log_events(events)).decode()
    assert "initializing process group" in shipped and "loss" in shipped and shipped.endswith("finished\n")
    agent.close()


def test_heartbeat_reports_the_models_and_images_the_node_holds(plane, events, sleeps):
    runtime = FakeRuntime(events)
    runtime.images = lambda: ["vllm:0.6", "busybox:latest"]
    agent = Agent(AgentClient(plane.url, "node-token"), runtime, card_source=lambda: [],
                  topology_source=lambda: None, cpu_percent=lambda: 1.0, memory_used=lambda: 1,
                  model_source=lambda: ["qwen2-7b"])

    labels = agent.heartbeat_payload()["labels"]

    assert labels[MODELS_LABEL] == "qwen2-7b" and labels[IMAGES_LABEL] == "busybox:latest,vllm:0.6"
