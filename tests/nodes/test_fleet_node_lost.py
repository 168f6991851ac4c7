"""End to end over HTTP with the simulated fleet (design §15.4, §15.5): one agent dies mid-run.

After `node_lost_timeout` its tasks are failed `NodeLost`, its cards free, the gang it ran restarts on the other
nodes, and when the agent comes back (adopting the processes it left) its heartbeat gets them in a `kill` list,
and then nothing more.
"""

import time
from io import StringIO

import pytest
import requests
from django.contrib.auth import get_user_model
from django.core.management import call_command
from knox.models import AuthToken

from nodes.management.commands.simulate_fleet import SimulatedNode, simulated_agent
from nodes.models import Node
from nodes.agent.runtime import SimulatedRuntime
from scheduling.models import Task, TaskGroup
from tenants.services import tenant_user_create
from tests.factories import ledger_mismatches, make_node

pytestmark = pytest.mark.django_db(transaction=True)

NODE_LOST_TIMEOUT = 2


def run_loops(*names: str) -> str:
    out = StringIO()
    call_command("run_loops", "--once", "--only", *names, stdout=out)
    return out.getvalue()


class Member:
    """One simulated agent of the fleet, with the heartbeat answers it got."""

    def __init__(self, server: str, node: Node, state_dir, admin_token: str):
        self.server, self.state_dir = server, state_dir
        self.spec = SimulatedNode.of(Node.objects.prefetch_related("gpus").get(id=node.id))
        registration = requests.post(f"{server}/api/v1/agent/register", timeout=10, json={
            "name": node.name, "internal_ip": self.spec.internal_ip, "public_ip": None,
            "cpu_cores": node.cpu_cores, "memory_gb": node.memory_gb},
            headers={"Authorization": f"Token {admin_token}"})
        assert registration.status_code == 200, registration.text
        self.token = registration.json()["token"]
        self.replies: list[dict] = []
        self.start()

    def start(self) -> None:
        """A fresh agent process, as after a restart of the host's agent: it adopts what is still running."""
        self.agent = simulated_agent(self.server, self.token, self.spec, 1.0, self.state_dir)
        heartbeat = self.agent.client.heartbeat

        def recording(payload):
            self.replies.append(heartbeat(payload))
            return self.replies[-1]

        self.agent.client.heartbeat = recording

    def step(self) -> None:
        self.agent.run_once()

    def die(self) -> None:
        self.agent.close()


@pytest.fixture
def fleet(live_server, settings, tmp_path):
    settings.SCHEDULER = {**settings.SCHEDULER, "heartbeat_timeout": 1, "node_lost_timeout": NODE_LOST_TIMEOUT}
    # Everything starts on `doomed`: the other two are cordoned until it has dealt the work out.
    nodes = [make_node(name="doomed", cards=4), make_node(name="spare-1", cards=2, schedulable=False),
             make_node(name="spare-2", cards=2, schedulable=False)]
    # The nodes exist already: registering an existing name takes an admin token (the join token only creates).
    admin = get_user_model().objects.create_user(username="fleet-admin", is_staff=True)
    admin_token = AuthToken.objects.create(user=admin)[1]
    members = {node.name: Member(live_server.url, node, tmp_path / node.name, admin_token) for node in nodes}
    yield members
    for member in members.values():
        member.die()
        leftover = SimulatedRuntime(member.state_dir)
        for handle in leftover.adopt().values():
            leftover.kill(handle)


def test_a_lost_agent_gives_up_its_tasks_the_gang_moves_and_the_returning_agent_kills_its_leftovers(
        live_server, fleet, tenant):
    _, token = tenant_user_create(tenant=tenant, username="fleet-user", password="fleet-password")
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    for member in fleet.values():
        member.step()
    batch = session.post(f"{live_server.url}/api/v1/tasks", timeout=10, json={
        "name": "batch", "type": "batch", "image": "busybox", "command": "true", "gpu_type": "nvidia",
        "gpu_required": 1, "labels": {"HETEROFLOW_SIM_SECONDS": "60"}})
    gang = session.post(f"{live_server.url}/api/v1/task-groups", timeout=10, json={
        "name": "llm", "type": "training", "world_size": 2, "gpus_per_worker": 1, "gpu_type": "nvidia"})
    assert (batch.status_code, gang.status_code) == (201, 201), (batch.text, gang.text)
    batch_id, group_id = batch.json()["id"], gang.json()["id"]
    run_loops("cycle")
    for member in fleet.values():
        member.step()  # doomed claims and starts all three
    first_run = [member["task"] for member in session.get(f"{live_server.url}/api/v1/task-groups/{group_id}",
                                                          timeout=10).json()["members"]]
    on_doomed = sorted([batch_id, *first_run])
    assert sorted(Task.objects.filter(node__name="doomed", status="running").values_list("id", flat=True)) == \
        on_doomed
    Node.objects.filter(name__startswith="spare").update(schedulable=True)

    fleet["doomed"].die()  # mid-run: its three processes go on without an agent
    deadline = time.monotonic() + NODE_LOST_TIMEOUT + 1.5
    while time.monotonic() < deadline:
        fleet["spare-1"].step()
        fleet["spare-2"].step()
        time.sleep(0.2)
    out = run_loops("liveness", "node-lost")

    assert "1 lost node(s) (doomed)" in out
    batch_task = Task.objects.get(id=batch_id)
    assert (batch_task.status, batch_task.reason) == ("failed", "NodeLost")
    assert set(Task.objects.filter(id__in=first_run).values_list("status", "reason")) == {("failed", "NodeLost")}
    doomed = Node.objects.get(name="doomed")
    assert (doomed.status, doomed.gpu_used) == ("offline", 0)
    group = TaskGroup.objects.get(id=group_id)
    assert (group.status, group.restarts) == ("restarting", 1)

    run_loops("cycle")
    fleet["spare-1"].step()
    fleet["spare-2"].step()
    detail = session.get(f"{live_server.url}/api/v1/task-groups/{group_id}", timeout=10).json()
    assert detail["status"] == "running"
    assert {member["node"] for member in detail["members"]} <= {"spare-1", "spare-2"}
    assert {member["status"] for member in detail["members"]} == {"running"}

    fleet["doomed"].start()  # the agent is back and adopts the processes it left
    fleet["doomed"].step()
    fleet["doomed"].step()
    first, second = fleet["doomed"].replies[-2:]
    assert sorted(first["kill"]) == on_doomed
    assert second["kill"] == []
    assert SimulatedRuntime(fleet["doomed"].state_dir).adopt() == {}
    assert ledger_mismatches() == []
