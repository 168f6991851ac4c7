"""Lost nodes (design §15.4), through `manage.py run_loops` against the database."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from nodes.models import Node
from nodes.services import agent_register
from scheduling.fair_share import quotas
from scheduling.models import Task, TaskEvent
from scheduling.services.task_transition import task_transition
from tests.factories import ledger_mismatches, make_node, make_task
from tests.nodes.conftest import heartbeat_body, node_client
from tests.scheduling.preemption.conftest import placed_task

pytestmark = pytest.mark.django_db


def run_loops(*names: str) -> str:
    out = StringIO()
    call_command("run_loops", "--once", "--only", *names, stdout=out)
    return out.getvalue()


def silent_for(node: Node, seconds: float) -> None:
    Node.objects.filter(id=node.id).update(status="offline",
                                           last_heartbeat_at=timezone.now() - timedelta(seconds=seconds))


@pytest.fixture
def lost_node(tenant, settings):
    """A node with one task in each active state, offline for longer than the (default) node_lost_timeout."""
    settings.SCHEDULER = {**settings.SCHEDULER, "node_lost_timeout": 300}
    node = make_node(cards=8)
    tasks = {
        "scheduled": placed_task(tenant=tenant, node=node, gpus=[0], status="scheduled"),
        "running": placed_task(tenant=tenant, node=node, gpus=[1, 2]),
        "stopping": placed_task(tenant=tenant, node=node, gpus=[3]),
        "timed_out": placed_task(tenant=tenant, node=node, gpus=[4]),
        "preempting": placed_task(tenant=tenant, node=node, gpus=[5, 6], status="preempting"),
    }
    assert task_transition(tasks["stopping"].id, "running", "stopping", reason="stopped by user")
    assert task_transition(tasks["timed_out"].id, "running", "stopping", reason="Timeout")
    silent_for(node, 301)
    return node, tasks


def test_each_task_leaves_a_lost_node_by_its_own_arc_and_everything_is_freed(lost_node, tenant):
    node, tasks = lost_node
    assert Node.objects.get(id=node.id).gpu_used == 7

    out = run_loops("node-lost")

    assert f"1 lost node(s) ({node.name}): 5 task(s) released" in out
    after = {name: Task.objects.get(id=task.id) for name, task in tasks.items()}
    assert (after["scheduled"].status, after["scheduled"].node_id) == ("pending", None)
    assert after["scheduled"].reason.startswith("NodeLost")
    assert (after["running"].status, after["running"].reason) == ("failed", "NodeLost")
    assert (after["stopping"].status, after["stopping"].reason) == ("stopped", "stopped by user")
    assert (after["timed_out"].status, after["timed_out"].reason) == ("failed", "Timeout")
    assert (after["preempting"].status, after["preempting"].preempt_count) == ("pending", 1)
    assert Node.objects.get(id=node.id).gpu_used == 0
    assert ledger_mismatches() == []
    assert quotas.tenant_gpu_usage().get(tenant.id, 0) == 0


def test_a_second_sweep_changes_nothing(lost_node):
    run_loops("node-lost")
    events = TaskEvent.objects.count()
    assert "no lost node" in run_loops("node-lost")
    assert TaskEvent.objects.count() == events


def test_an_offline_node_within_the_timeout_keeps_its_tasks(tenant, settings):
    settings.SCHEDULER = {**settings.SCHEDULER, "node_lost_timeout": 300}
    node = make_node(cards=2)
    task = placed_task(tenant=tenant, node=node, gpus=[0])
    silent_for(node, 299)

    assert "no lost node" in run_loops("node-lost")
    assert Task.objects.get(id=task.id).status == "running"


def test_the_timeout_comes_from_the_setting(tenant, settings):
    settings.SCHEDULER = {**settings.SCHEDULER, "node_lost_timeout": 30}
    node = make_node(cards=2)
    task = placed_task(tenant=tenant, node=node, gpus=[0])
    silent_for(node, 31)

    run_loops("node-lost")
    assert Task.objects.get(id=task.id).status == "failed"


def test_liveness_then_node_lost_in_one_pass(tenant, settings):
    settings.SCHEDULER = {**settings.SCHEDULER, "heartbeat_timeout": 30, "node_lost_timeout": 300}
    node = make_node(cards=2)
    task = placed_task(tenant=tenant, node=node, gpus=[0])
    Node.objects.filter(id=node.id).update(last_heartbeat_at=timezone.now() - timedelta(seconds=400))

    out = run_loops("liveness", "node-lost")

    assert out.splitlines()[0] == "liveness: 1 silent node(s) marked offline"
    assert Task.objects.get(id=task.id).status == "failed"


class TestKillReply:
    """The heartbeat's `running` list and its `kill` answer."""

    @pytest.fixture
    def registered(self):
        return agent_register(name="gpu-a", internal_ip="10.0.3.7/24", public_ip=None, cpu_cores=64, memory_gb=512)

    @pytest.fixture
    def agent(self, registered):
        return node_client(registered[1])

    def test_kill_lists_what_the_node_no_longer_runs(self, agent, registered, tenant):
        node, _ = registered
        other = make_node(cards=2)
        mine = placed_task(tenant=tenant, node=node, gpus=[0])
        stopping = placed_task(tenant=tenant, node=node, gpus=[1])
        assert task_transition(stopping.id, "running", "stopping")
        lost = placed_task(tenant=tenant, node=node, gpus=[2])
        assert task_transition(lost.id, "running", "failed", reason="NodeLost")
        elsewhere = placed_task(tenant=tenant, node=other, gpus=[0])
        not_started = placed_task(tenant=tenant, node=node, gpus=[3], status="scheduled")
        finished_here = make_task(tenant=tenant)
        unknown = finished_here.id + 1000

        reply = agent.post("/api/v1/agent/heartbeat", heartbeat_body(
            running=[mine.id, stopping.id, lost.id, elsewhere.id, not_started.id, unknown]), format="json")

        assert reply.status_code == 200
        assert reply.json()["kill"] == sorted([lost.id, elsewhere.id, not_started.id, unknown])

    def test_nothing_to_kill_once_the_agent_runs_what_it_should(self, agent, registered, tenant):
        node, _ = registered
        mine = placed_task(tenant=tenant, node=node, gpus=[0])
        assert agent.post("/api/v1/agent/heartbeat", heartbeat_body(running=[mine.id]),
                          format="json").json()["kill"] == []
        assert agent.post("/api/v1/agent/heartbeat", heartbeat_body(), format="json").json()["kill"] == []

    def test_a_running_task_its_agent_does_not_run_fails_once_past_the_heartbeat_timeout(self, agent, registered,
                                                                                           tenant):
        node, _ = registered
        listed = placed_task(tenant=tenant, node=node, gpus=[0])
        forgotten = placed_task(tenant=tenant, node=node, gpus=[1, 2])
        just_claimed = placed_task(tenant=tenant, node=node, gpus=[3])
        long_ago = timezone.now() - timedelta(minutes=5)
        Task.objects.filter(id__in=[listed.id, forgotten.id]).update(status_changed_at=long_ago)

        agent.post("/api/v1/agent/heartbeat", heartbeat_body(running=[listed.id]), format="json")

        assert [Task.objects.get(id=task.id).status for task in (listed, forgotten, just_claimed)] == \
            ["running", "failed", "running"]
        assert Task.objects.get(id=forgotten.id).events.last().reason.startswith("AgentLost")
        node.refresh_from_db()
        assert node.gpu_used == 2 and ledger_mismatches() == []

    def test_an_agent_that_does_not_say_what_it_runs_loses_no_task(self, agent, registered, tenant):
        node, _ = registered
        task = placed_task(tenant=tenant, node=node, gpus=[0])
        Task.objects.filter(id=task.id).update(status_changed_at=timezone.now() - timedelta(minutes=5))

        assert agent.post("/api/v1/agent/heartbeat", heartbeat_body(), format="json").json()["kill"] == []

        assert Task.objects.get(id=task.id).status == "running"

    def test_running_must_be_task_ids(self, agent, registered):
        reply = agent.post("/api/v1/agent/heartbeat", heartbeat_body(running=["seven"]), format="json")
        assert reply.status_code == 400
        assert "running" in str(reply.json())
        registered[0].refresh_from_db()
        assert registered[0].last_heartbeat_at is None

    def test_a_victim_the_watchdog_settled_is_killed_until_the_agent_confirms(self, agent, registered, tenant):
        node, _ = registered
        victim = placed_task(tenant=tenant, node=node, gpus=[0, 1], status="preempting")
        Task.objects.filter(id=victim.id).update(status_changed_at=timezone.now() - timedelta(seconds=90))

        assert run_loops("watchdog") == "watchdog: 1 unconfirmed preemption(s) settled\n"

        work = agent.get("/api/v1/agent/work").json()
        assert work["stop"] == []
        for _ in range(2):  # as long as the agent still runs it
            assert agent.post("/api/v1/agent/heartbeat", heartbeat_body(running=[victim.id]),
                              format="json").json()["kill"] == [victim.id]
        assert agent.post("/api/v1/agent/heartbeat", heartbeat_body(running=[]), format="json").json()["kill"] == []
