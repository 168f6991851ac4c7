import pytest

from nodes.services import agent_register, node_heartbeat_apply
from scheduling.models import Task
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task
from tests.nodes.conftest import agent, card, node_client, registered  # noqa: F401  (agent and registered: fixtures)

WORK = "/api/v1/agent/work"


def _status_url(task_id: int) -> str:
    return f"/api/v1/agent/tasks/{task_id}/status"


@pytest.fixture
def bound_task(registered, tenant):
    node = registered[0]
    node_heartbeat_apply(node=node, cpu_percent=1, memory_used_mb=1, gpus=[card(i) for i in range(4)], labels={})
    task = make_task(tenant=tenant, gpu_required=2, image="pytorch:2", command="python train.py",
                     env={"A": "1"}, labels={"team": "ml"}, priority=70)
    assert task_transition(task.id, "pending", "scheduled", node=node, gpus=[2, 3],
                           shard={"card": 2, "env": {"B": 2}})
    return task


class TestWork:
    def test_lists_scheduled_to_start_and_stopping_to_stop(self, agent, registered, bound_task, tenant):
        node = registered[0]
        stopping = make_task(tenant=tenant, gpu_required=1, termination_grace_seconds=30)
        assert task_transition(stopping.id, "pending", "scheduled", node=node, gpus=[0])
        assert task_transition(stopping.id, "scheduled", "stopping")
        victim = make_task(tenant=tenant, gpu_required=1, preemptible=True)
        assert task_transition(victim.id, "pending", "scheduled", node=node, gpus=[1])
        assert task_transition(victim.id, "scheduled", "preempting")
        make_task(tenant=tenant, gpu_required=1, status="running", node=node)
        make_task(tenant=tenant, gpu_required=1, status="scheduled", node=make_node())
        body = agent.get(WORK).json()
        # Each stop gives the container its task's grace (design §17.1).
        assert body["stop"] == [{"id": stopping.id, "status": "stopping", "grace_seconds": 30},
                                {"id": victim.id, "status": "preempting", "grace_seconds": 10}]
        [start] = body["start"]
        assert start == {
            "id": bound_task.id, "name": bound_task.name, "image": "pytorch:2", "command": "python train.py",
            "type": "batch", "gpu_type": "", "gpus": [2, 3], "port": None, "env": {"A": "1", "B": "2"},
            "labels": {"team": "ml"}, "priority": 70,
            "tenant": tenant.id, "cpu_cores": 0.0, "memory_mb": 0, "node_address": "10.0.3.7", "readiness": None,
            "metric": None,
        }


class TestStatusReport:
    def test_won_then_stale(self, agent, bound_task):
        url = _status_url(bound_task.id)
        assert agent.post(url, {"from": "scheduled", "to": "running"}, format="json").json() == {"won": True}
        stale = agent.post(url, {"from": "scheduled", "to": "running"}, format="json")
        assert (stale.status_code, stale.json()) == (409, {"won": False})
        assert Task.objects.get(id=bound_task.id).status == "running"

    def test_illegal_pair_is_400_naming_both_states(self, agent, bound_task):
        response = agent.post(_status_url(bound_task.id), {"from": "preempting", "to": "stopped"}, format="json")
        assert response.status_code == 400
        assert "preempting → stopped" in str(response.json())

    def test_arcs_the_agent_does_not_own_are_403(self, agent, bound_task):
        response = agent.post(_status_url(bound_task.id), {"from": "scheduled", "to": "stopping"}, format="json")
        assert response.status_code == 403
        assert Task.objects.get(id=bound_task.id).status == "scheduled"

    def test_another_nodes_token_is_refused(self, db, bound_task):
        _, other_token = agent_register(name="gpu-other", internal_ip="10.0.3.9/24", public_ip=None, cpu_cores=8,
                                        memory_gb=32)
        response = node_client(other_token).post(_status_url(bound_task.id), {"from": "scheduled", "to": "running"},
                                                 format="json")
        assert response.status_code == 404
        assert Task.objects.get(id=bound_task.id).status == "scheduled"

    def test_body_is_strict(self, agent, bound_task):
        url = _status_url(bound_task.id)
        misspelt = agent.post(url, {"from": "scheduled", "to": "runing"}, format="json")
        assert misspelt.status_code == 400 and set(misspelt.json()["errors"]) == {"to"}
        unknown = agent.post(url, {"from": "scheduled", "to": "running", "x": 1}, format="json")
        assert unknown.status_code == 400 and set(unknown.json()["errors"]) == {"x"}
        assert Task.objects.get(id=bound_task.id).status == "scheduled"
