"""The node agent against the real HTTP API of a live server, with the simulated runtime."""

import time

import pytest
import requests

from nodes.agent.agent import Agent
from nodes.agent.client import AgentClient, RetryPolicy
from nodes.agent.detectors import fake_cards_for
from nodes.agent.runtime import SimulatedRuntime
from nodes.models import Node
from scheduling.cycle.run import run_cycle
from scheduling.models import Task, TaskEvent
from nodes.services import node_update
from tenants.services import tenant_user_create

pytestmark = pytest.mark.django_db(transaction=True)

JOIN_TOKEN = "e2e-join-token-of-at-least-32-characters"


def _agent(server: str, token: str) -> Agent:
    return Agent(
        AgentClient(server, token, retry=RetryPolicy(attempts=1)),
        SimulatedRuntime(),
        card_source=lambda: fake_cards_for("nvidia", "A100", 2, 81920, [0, 1]),
        topology_source=lambda: None,
        cpu_percent=lambda: 5.0,
        memory_used=lambda: 2048,
        workers=2,
    )


def _run_until(agent: Agent, task_id: int, status: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while Task.objects.get(id=task_id).status != status:
        assert time.monotonic() < deadline, f"task {task_id} never reached {status}"
        time.sleep(0.1)
        agent.run_once()


@pytest.fixture
def fleet(live_server, settings, tenant):
    """A node registered over HTTP with the join token, its agent, and a tenant's HTTP session."""
    settings.HETEROFLOW_JOIN_TOKEN = JOIN_TOKEN
    registration = requests.post(
        f"{live_server.url}/api/v1/agent/register",
        json={"name": "sim-1", "internal_ip": "10.1.0.5/16", "public_ip": None, "cpu_cores": 32, "memory_gb": 128},
        headers={"Authorization": f"Token {JOIN_TOKEN}"}, timeout=10,
    )
    assert registration.status_code == 200, registration.text
    # A node the join token registered waits for an admin's approval (design §16.5).
    joined = Node.objects.get(id=registration.json()["node_id"])
    assert not joined.schedulable
    node_update(node=joined, schedulable=True)
    agent = _agent(live_server.url, registration.json()["token"])
    _, tenant_token = tenant_user_create(tenant=tenant, username="e2e-user", password="e2e-password")
    session = requests.Session()
    session.headers["Authorization"] = f"Token {tenant_token}"
    yield Node.objects.get(id=registration.json()["node_id"]), agent, session
    agent.close()


def _submit(live_server, session, **fields) -> int:
    body = {"name": "e2e", "type": "batch", "image": "busybox", "command": "true", "gpu_type": "nvidia",
            "gpu_required": 1, **fields}
    response = session.post(f"{live_server.url}/api/v1/tasks", json=body, timeout=10)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _schedule(task_id: int, node: Node) -> None:
    assert run_cycle().bound == 1
    task = Task.objects.get(id=task_id)
    assert (task.status, task.node_id, len(task.gpus)) == ("scheduled", node.id, 1)


def test_task_runs_to_success_and_releases_its_card(live_server, fleet):
    node, agent, session = fleet
    agent.run_once()
    node.refresh_from_db()
    assert (node.status, node.gpu_total, node.gpu_type) == ("online", 2, "nvidia")

    task_id = _submit(live_server, session, labels={"HETEROFLOW_SIM_SECONDS": "0.3"})
    _schedule(task_id, node)
    node.refresh_from_db()
    assert node.gpu_used == 1

    agent.run_once()  # claims scheduled → running and starts the stand-in process
    assert Task.objects.get(id=task_id).status == "running"
    _run_until(agent, task_id, "succeeded")

    node.refresh_from_db()
    assert node.gpu_used == 0
    assert list(TaskEvent.objects.filter(task_id=task_id).values_list("to_status", flat=True)) == [
        "scheduled", "running", "succeeded"]


def test_failing_process_is_reported_failed(live_server, fleet):
    node, agent, session = fleet
    agent.run_once()
    task_id = _submit(live_server, session, labels={"HETEROFLOW_SIM_SECONDS": "0.1", "HETEROFLOW_SIM_EXIT_CODE": "3"})
    _schedule(task_id, node)
    _run_until(agent, task_id, "failed")
    assert "exit code 3" in Task.objects.get(id=task_id).reason


def test_user_stop_reaches_the_agent(live_server, fleet):
    node, agent, session = fleet
    agent.run_once()
    task_id = _submit(live_server, session, labels={"HETEROFLOW_SIM_SECONDS": "60"})
    _schedule(task_id, node)
    agent.run_once()
    assert Task.objects.get(id=task_id).status == "running"
    assert session.post(f"{live_server.url}/api/v1/tasks/{task_id}/stop", timeout=10).status_code == 200
    _run_until(agent, task_id, "stopped")
    node.refresh_from_db()
    assert node.gpu_used == 0


def test_the_agent_joins_with_the_join_token_and_keeps_its_node_token(live_server, settings, tmp_path):
    from nodes.agent.command_line import node_token

    settings.HETEROFLOW_JOIN_TOKEN = JOIN_TOKEN
    token_file = tmp_path / "node-token"
    options = {"server": live_server.url, "token_file": str(token_file), "name": "joiner-1",
               "internal_ip": "10.2.0.7/24", "public_ip": None}

    token = node_token(options, environment={"HETEROFLOW_JOIN_TOKEN": JOIN_TOKEN})

    node = Node.objects.get(name="joiner-1")
    assert (node.internal_ip, node.schedulable) == ("10.2.0.7/24", False), "it waits for an admin's approval"
    assert token_file.read_text().strip() == token and oct(token_file.stat().st_mode & 0o777) == "0o600"
    assert node_token(options, environment={"HETEROFLOW_JOIN_TOKEN": JOIN_TOKEN}) == token, "restarts reuse it"
    assert Node.objects.filter(name="joiner-1").count() == 1
    assert requests.post(f"{live_server.url}/api/v1/agent/heartbeat", json={}, timeout=10,
                         headers={"Authorization": f"Token {token}"}).status_code != 401


def test_joining_without_an_address_or_with_a_wrong_join_token_says_why(live_server, settings, tmp_path):
    from nodes.agent.command_line import node_token

    settings.HETEROFLOW_JOIN_TOKEN = JOIN_TOKEN
    options = {"server": live_server.url, "token_file": str(tmp_path / "t"), "name": "joiner-2",
               "internal_ip": None, "public_ip": None}
    with pytest.raises(ValueError, match="--internal-ip"):
        node_token(options, environment={"HETEROFLOW_JOIN_TOKEN": JOIN_TOKEN})
    with pytest.raises(ValueError, match="answered 40"):
        node_token({**options, "internal_ip": "10.2.0.8/24"},
                   environment={"HETEROFLOW_JOIN_TOKEN": "not-the-join-token-but-32-characters-long"})
    assert not Node.objects.filter(name="joiner-2").exists()
