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


@pytest.mark.django_db(transaction=True)
def test_a_fleet_card_fault_from_the_flag_or_the_command_is_reported_failed(live_server, settings, tmp_path):
    from io import StringIO

    from django.core.management import call_command

    from nodes.agent.simulated_health import SimulatedCardHealth, faults_in
    from nodes.models import GPU

    settings.HETEROFLOW_JOIN_TOKEN = ""
    node = make_node(name="demo-a", cards=2, status="offline")
    call_command("card_fault", "demo-a", "1", "--state-dir", str(tmp_path), stdout=StringIO())
    assert list(faults_in(tmp_path / "demo-a")) == ["nvidia:1"]
    command = Command()
    member = SimulatedNode.of(Node.objects.prefetch_related("gpus").get(id=node.id))
    agent = simulated_agent(live_server.url, command._register(live_server.url, command._admin_token(), member),
                            member, 1.0, tmp_path / "demo-a")
    try:
        agent.run_once()
    finally:
        agent.close()
    assert list(GPU.objects.filter(node=node).order_by("index").values_list("health", flat=True)) == ["ok", "failed"]
    assert GPU.objects.get(node=node, index=1).quarantined
    # At a rate of 1 every card fails on the next heartbeat; the fault stays until cleared.
    every = SimulatedCardHealth(tmp_path / "rate", fault_rate=1.0)
    assert every(member.cards)["nvidia"].verdict == "failed"
    assert SimulatedCardHealth(tmp_path / "rate")(member.cards)["nvidia"].verdict == "failed"
    out = StringIO()
    call_command("card_fault", "demo-a", "1", "--clear", "--state-dir", str(tmp_path), stdout=out)
    assert "fault cleared" in out.getvalue() and faults_in(tmp_path / "demo-a") == {}


def test_bad_card_fault_flags_are_refused():
    from nodes.management.commands.simulate_fleet import _card_fault, _rate

    with pytest.raises(Exception, match="NODE:INDEX"):
        _card_fault("no-index")
    with pytest.raises(Exception, match="probability"):
        _rate("2")
    assert _card_fault("gpu-3:1") == ("gpu-3", 1) and _rate("0.01") == 0.01
