"""design §17.2 through the real agent and the simulated runtime against a live server: readiness probes, endpoints,
restarts of replicas that stop answering, and rolling updates that keep the ready count (sampled through the API)."""

import time

import pytest
import requests

from nodes.agent.agent import Agent
from nodes.agent.client import AgentClient, RetryPolicy
from nodes.agent.detectors import fake_cards_for
from nodes.agent.runtime import SimulatedRuntime
from nodes.services import agent_register
from scheduling.cycle.run import run_cycle
from scheduling.groups.replicas import rebuild_inference_groups
from scheduling.groups.rollout import drive_rollouts
from scheduling.models import Task
from tenants.services import tenant_user_create

pytestmark = pytest.mark.django_db(transaction=True)

# Replicas live for the test's length; they are stopped at its end.
LONG_LIVED = {"HETEROFLOW_SIM_SECONDS": "600", "HETEROFLOW_SIM_READY_SECONDS": "1"}
PROBE = {"path": "/health", "period_seconds": 1, "failure_threshold": 2}


class Fleet:
    def __init__(self, server: str, session: requests.Session, agents: list[Agent], restart):
        self.server, self.session, self.agents = server, session, agents
        # restart(index) -> a new agent process for node `index`, on the same token and state directory.
        self.restart = restart

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        return self.session.request(method, f"{self.server}/api/v1{path}", timeout=10, **kwargs)

    def tick(self) -> None:
        """One round of what the scheduler's tickers and the node agents do."""
        run_cycle()
        for agent in self.agents:
            agent.run_once()
        rebuild_inference_groups()
        drive_rollouts()

    def until(self, condition, *, timeout: float = 40.0, every=None):
        deadline = time.monotonic() + timeout
        while True:
            self.tick()
            if every is not None:
                every()
            value = condition()
            if value:
                return value
            assert time.monotonic() < deadline, "condition never met"
            time.sleep(0.2)


@pytest.fixture
def fleet(live_server, tenant, tmp_path):
    tokens = [agent_register(name=f"sim-{index}", internal_ip=f"10.1.0.{5 + index}/16", public_ip=None,
                             cpu_cores=32, memory_gb=128)[1] for index in range(2)]
    cards = [fake_cards_for("nvidia", "A100", 4, 81920, [0, 0, 1, 1]) for _ in tokens]

    def agent(index: int) -> Agent:
        return Agent(AgentClient(live_server.url, tokens[index], retry=RetryPolicy(attempts=1)),
                     SimulatedRuntime(tmp_path / f"sim-{index}"), card_source=lambda: list(cards[index]),
                     topology_source=lambda: None, cpu_percent=lambda: 5.0, memory_used=lambda: 2048, workers=4)

    agents = [agent(index) for index in range(len(tokens))]

    def restart(index: int) -> Agent:
        agents[index].close()  # its stand-ins keep running, as containers outlive their agent
        agents[index] = agent(index)
        return agents[index]

    _, tenant_token = tenant_user_create(tenant=tenant, username="svc-user", password="svc-password")
    session = requests.Session()
    session.headers["Authorization"] = f"Token {tenant_token}"
    yield Fleet(live_server.url, session, agents, restart)
    for agent in agents:
        for task_id in agent.running_task_ids():
            agent._kill(task_id)
        agent.close()


def _service(fleet: Fleet, **changes) -> int:
    body = {"name": "svc", "type": "inference", "world_size": 1, "gpus_per_worker": 1, "gpu_type": "nvidia",
            "replicas": 3, "image": "vllm:1", "command": "serve", "env": LONG_LIVED, "readiness": PROBE, **changes}
    response = fleet.api("POST", "/task-groups", json=body)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _ready(fleet: Fleet, group_id: int) -> int:
    return fleet.api("GET", f"/task-groups/{group_id}").json()["ready_replicas"]


def test_replicas_become_ready_after_their_start_up_and_endpoints_list_only_ready_ones(fleet):
    serving = _service(fleet, replicas=2)
    loading = _service(fleet, name="loading", replicas=1, env={**LONG_LIVED, "HETEROFLOW_SIM_READY_SECONDS": "inf"})

    fleet.until(lambda: _ready(fleet, serving) == 2)
    endpoints = fleet.api("GET", f"/task-groups/{serving}/endpoints").json()

    assert len(endpoints) == 2
    for endpoint in endpoints:
        task = Task.objects.select_related("node").get(id=endpoint["task"])
        assert (endpoint["node"], endpoint["port"], endpoint["replica"]) == (task.node.name, task.port, task.rank)
        assert endpoint["address"] == task.node.internal_ip.split("/")[0]
    assert Task.objects.get(group_id=loading).status == "running"
    assert fleet.api("GET", f"/task-groups/{loading}/endpoints").json() == []
    assert _ready(fleet, loading) == 0


def test_a_replica_that_stops_answering_its_probe_is_restarted(fleet):
    group_id = _service(fleet, replicas=1,
                        env={**LONG_LIVED, "HETEROFLOW_SIM_UNREADY_AFTER_SECONDS": "3"})

    fleet.until(lambda: Task.objects.filter(group_id=group_id, status__in=["stopping", "stopped"]).exists())
    restarted = Task.objects.filter(group_id=group_id).order_by("id").first()

    assert restarted.ready_at is not None
    assert restarted.reason.startswith("restarted: readiness probe failed 2 times in a row")
    fleet.until(lambda: Task.objects.filter(group_id=group_id, status="running").exclude(id=restarted.id).exists())


def test_a_restarted_agent_probes_the_replicas_it_adopted(fleet):
    group_id = _service(fleet, replicas=1, env={**LONG_LIVED, "HETEROFLOW_SIM_UNREADY_AFTER_SECONDS": "6"})
    fleet.until(lambda: _ready(fleet, group_id) == 1)
    replica = Task.objects.select_related("node").get(group_id=group_id)

    adopting = fleet.restart(int(replica.node.name.removeprefix("sim-")))

    assert adopting.running_task_ids() == [replica.id]
    fleet.until(lambda: Task.objects.get(id=replica.id).status in ("stopping", "stopped"))
    assert Task.objects.get(id=replica.id).reason.startswith("restarted: readiness probe failed")


def test_a_rollout_of_three_replicas_never_has_fewer_than_three_ready(fleet):
    group_id = _service(fleet)
    fleet.until(lambda: _ready(fleet, group_id) == 3)
    samples = []

    response = fleet.api("PATCH", f"/task-groups/{group_id}", json={"image": "vllm:2"})
    assert response.status_code == 200, response.text
    revisions = fleet.until(
        lambda: (revisions := fleet.api("GET", f"/task-groups/{group_id}/revisions").json())[0]["state"] == "complete"
        and revisions, every=lambda: samples.append(_ready(fleet, group_id)), timeout=90)

    assert min(samples) >= 3, samples
    assert [(r["number"], r["state"], r["replicas"], r["ready"]) for r in revisions] == [
        (2, "complete", 3, 3), (1, "superseded", 0, 0)]
    live = Task.objects.filter(group_id=group_id, status="running")
    assert {(task.image, task.revision) for task in live} == {("vllm:2", 2)}


def test_a_revision_that_never_becomes_ready_is_rolled_back(fleet):
    group_id = _service(fleet, ready_timeout_seconds=4)
    fleet.until(lambda: _ready(fleet, group_id) == 3)
    samples = []

    response = fleet.api("PATCH", f"/task-groups/{group_id}",
                         json={"image": "vllm:broken", "env": {**LONG_LIVED, "HETEROFLOW_SIM_READY_SECONDS": "inf"}})
    assert response.status_code == 200, response.text
    revisions = fleet.until(
        lambda: (revisions := fleet.api("GET", f"/task-groups/{group_id}/revisions").json())[0]["state"]
        == "rolled_back" and revisions, every=lambda: samples.append(_ready(fleet, group_id)), timeout=60)

    assert min(samples) >= 3, samples
    assert revisions[0]["reason"].startswith("rolled back: revision 2 not ready within 4 s")
    group = fleet.api("GET", f"/task-groups/{group_id}").json()
    assert (group["revision"], group["image"]) == (1, "vllm:1")
    assert set(Task.objects.filter(group_id=group_id).exclude(status__in=["stopped", "failed"])
               .values_list("revision", flat=True)) == {1}


def test_a_service_is_created_becomes_ready_rolls_scales_and_stops(fleet):
    group_id = _service(fleet, replicas=2)
    fleet.until(lambda: _ready(fleet, group_id) == 2)

    assert fleet.api("PATCH", f"/task-groups/{group_id}", json={"command": "serve --v2"}).status_code == 200
    fleet.until(lambda: fleet.api("GET", f"/task-groups/{group_id}/revisions").json()[0]["state"] == "complete",
                timeout=60)
    assert fleet.api("PATCH", f"/task-groups/{group_id}", json={"replicas": 3}).status_code == 200
    fleet.until(lambda: len(fleet.api("GET", f"/task-groups/{group_id}/endpoints").json()) == 3)
    assert {task.command for task in Task.objects.filter(group_id=group_id, status="running")} == {"serve --v2"}

    stopped = fleet.api("POST", f"/task-groups/{group_id}/stop")

    assert stopped.status_code == 200, stopped.text
    fleet.until(lambda: fleet.api("GET", f"/task-groups/{group_id}").json()["status"] == "stopped")
    for _ in range(3):  # nothing comes back: the rebuild loop and the rollouts leave a stopped group alone
        fleet.tick()
    assert not Task.objects.filter(group_id=group_id).exclude(status__in=["stopped", "failed",
                                                                          "succeeded"]).exists()
    assert fleet.api("GET", f"/task-groups/{group_id}/endpoints").json() == []
    assert all(not agent.running_task_ids() for agent in fleet.agents)
