"""A card fails under a running 1-card task (design §17.3), end to end with the simulated fleet's agents over the
real HTTP API: the task runs elsewhere, the card takes nothing until an admin releases it."""

import time
from io import StringIO

import pytest
import requests
from django.core.management import call_command

from nodes.management.commands.simulate_fleet import Command as Fleet, SimulatedNode, simulated_agent
from nodes.models import GPU, Node
from scheduling.cycle.run import run_cycle
from scheduling.models import SchedulingAttempt, Task
from tenants.services import tenant_user_create
from tests.factories import make_node

pytestmark = pytest.mark.django_db(transaction=True)


def _until(agents, condition, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        for agent in agents:
            agent.run_once()
        run_cycle()
        time.sleep(0.05)


def test_a_card_fails_under_its_task_which_runs_elsewhere_and_the_card_takes_nothing_until_released(
        live_server, settings, tenant, tmp_path, admin_client):
    settings.HETEROFLOW_JOIN_TOKEN = ""
    for name in ("sim-a", "sim-b"):
        make_node(name=name, cards=1, status="offline")
    fleet = Fleet()
    credential = fleet._admin_token()
    agents = {}
    for node in Node.objects.prefetch_related("gpus").order_by("name"):
        member = SimulatedNode.of(node)
        agents[node.name] = simulated_agent(live_server.url, fleet._register(live_server.url, credential, member),
                                            member, 1.0, tmp_path / node.name)
    _, token = tenant_user_create(tenant=tenant, username="e2e", password="e2e-password")
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"

    def submit(name: str) -> int:
        response = session.post(f"{live_server.url}/api/v1/tasks", timeout=10, json={
            "name": name, "type": "batch", "image": "busybox", "command": "true", "gpu_type": "nvidia",
            "gpu_required": 1, "labels": {"HETEROFLOW_SIM_SECONDS": "120"}})  # outlives the test, not the run
        assert response.status_code == 201, response.text
        return response.json()["id"]

    try:
        for agent in agents.values():
            agent.run_once()
        task_id = submit("victim")
        _until(agents.values(), lambda: Task.objects.get(id=task_id).status == "running", "the task runs")
        first = Task.objects.get(id=task_id).node
        other = next(name for name in agents if name != first.name)

        out = StringIO()
        call_command("card_fault", first.name, "0", "--state-dir", str(tmp_path), stdout=out)
        assert "fails from the next heartbeat" in out.getvalue()
        _until(agents.values(), lambda: Task.objects.filter(id=task_id, status="running",
                                                            node__name=other).exists(), "the task runs elsewhere")

        task = Task.objects.get(id=task_id)
        assert task.preempt_count == 0
        card = GPU.objects.get(node=first, index=0)
        assert card.quarantined and card.health == "failed" and card.last_error["code"] == "xid-79"

        # The quarantined card takes nothing: a second task waits, named CardUnhealthy, while the card is out.
        waiting = submit("waiting")
        for _ in range(3):
            for agent in agents.values():
                agent.run_once()
            run_cycle()
        assert Task.objects.get(id=waiting).status == "pending"
        attempt = SchedulingAttempt.objects.filter(task_id=waiting).latest("id")
        assert "CardUnhealthy" in attempt.message

        # Repaired and released, it takes the waiting task.
        call_command("card_fault", first.name, "0", "--clear", "--state-dir", str(tmp_path), stdout=StringIO())
        agents[first.name].run_once()
        release = admin_client.post(f"/api/v1/nodes/{first.id}/cards/nvidia/0/release")
        assert release.status_code == 200, release.content
        _until(agents.values(), lambda: Task.objects.filter(id=waiting, status="running",
                                                            node_id=first.id).exists(), "the released card works")
    finally:
        for agent in agents.values():
            agent.close()
