import pytest
from django.contrib.auth import get_user_model

from nodes.agent.runtime import TaskSpec
from nodes.agent.topology import TOPOLOGY_LABEL
from nodes.management.commands.simulate_fleet import (
    FLEET_USERNAME,
    Command,
    FastForwardRuntime,
    SimulatedNode,
    simulated_agent,
)
from nodes.models import Node
from tests.factories import make_node

LABEL = "nv=0-1,2-3;numa=0:0,1:0,2:1,3:1"


@pytest.mark.django_db(transaction=True)
def test_a_fleet_member_keeps_the_nodes_cards_and_topology(live_server, settings, tmp_path):
    settings.HETEROFLOW_JOIN_TOKEN = ""
    node = make_node(name="demo-ascend", gpu_type="ascend", cards=4, model="910B", memory_mb=65536,
                     numa=[0, 0, 1, 1], status="offline", internal_ip="10.2.0.9/24",
                     labels={TOPOLOGY_LABEL: LABEL, "rdma": "true"})
    before = list(node.gpus.values_list("index", "uuid", "type", "model", "memory_total_mb", "numa"))
    command = Command()
    member = SimulatedNode.of(Node.objects.prefetch_related("gpus").get(id=node.id))
    token = command._register(live_server.url, command._admin_token(), member)
    agent = simulated_agent(live_server.url, token, member, 1.0, tmp_path)
    try:
        agent.run_once()
    finally:
        agent.close()
    node.refresh_from_db()
    assert get_user_model().objects.get(username=FLEET_USERNAME).is_staff
    assert (node.status, node.gpu_total, node.gpu_type, node.internal_ip) == ("online", 4, "ascend", "10.2.0.9/24")
    assert list(node.gpus.values_list("index", "uuid", "type", "model", "memory_total_mb", "numa")) == before
    assert node.labels[TOPOLOGY_LABEL] == LABEL and node.labels["rdma"] == "true"


def test_speedup_shortens_simulated_tasks(monkeypatch):
    started = []
    monkeypatch.setattr("nodes.agent.runtime.SimulatedRuntime.start", lambda self, spec: started.append(spec))
    FastForwardRuntime(10).start(TaskSpec(id=1, image="x", command="", labels={"HETEROFLOW_SIM_SECONDS": "30"}))
    FastForwardRuntime(10).start(TaskSpec(id=2, image="x", command=""))
    assert [spec.env["HETEROFLOW_SIM_SECONDS"] for spec in started] == ["3.0", "3.0"]
