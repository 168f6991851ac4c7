"""The preemption watchdog and its race with the agent's late report (design §9)."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from heteroflow_site.celery import run_periodic_job
from nodes.models import Node
from nodes.services import agent_register
from scheduling.models import Task, TaskEvent
from scheduling.preemption.settle import FORCED_REASON
from scheduling.preemption.watchdog import preemption_watchdog
from scheduling.services.agent_reports import agent_report_status
from tests.factories import make_node
from tests.nodes.conftest import node_client
from tests.scheduling.preemption.conftest import placed_task, statuses

RACE_ROUNDS = 50


def test_only_victims_preempting_for_more_than_60_seconds_are_forced(tenant):
    node = make_node(cards=2)
    victim = placed_task(tenant=tenant, node=node, gpus=[0], status="preempting")
    bystander = placed_task(tenant=tenant, node=node, gpus=[1], status="running")
    since = Task.objects.get(id=victim.id).status_changed_at

    assert preemption_watchdog(now=since + timedelta(seconds=60)) == 0
    assert statuses(victim) == ["preempting"]

    assert preemption_watchdog(now=since + timedelta(seconds=61)) == 1
    victim.refresh_from_db()
    assert (victim.status, victim.node_id, victim.preempt_count, victim.preemptible) == ("pending", None, 1, False)
    assert TaskEvent.objects.get(task_id=victim.id, to_status="pending").reason == FORCED_REASON
    assert statuses(bystander) == ["running"]
    assert Node.objects.get(id=node.id).gpu_used == 1


def test_a_victim_with_a_long_grace_is_given_its_grace_and_30_seconds_more(tenant):
    """design §17.1: the agent waits out the grace before the kill; the watchdog waits max(60 s, grace + 30 s)."""
    node = make_node(cards=2)
    patient = placed_task(tenant=tenant, node=node, gpus=[0], status="preempting")
    brief = placed_task(tenant=tenant, node=node, gpus=[1], status="preempting")
    Task.objects.filter(id=patient.id).update(termination_grace_seconds=120)
    Task.objects.filter(id=brief.id).update(termination_grace_seconds=0)
    Task.objects.filter(id__in=[patient.id, brief.id]).update(status_changed_at=timezone.now())
    since = Task.objects.get(id=patient.id).status_changed_at

    assert preemption_watchdog(now=since + timedelta(seconds=61)) == 1  # `brief`, at 60 s as before
    assert preemption_watchdog(now=since + timedelta(seconds=150)) == 0
    assert statuses(patient) == ["preempting"]
    assert preemption_watchdog(now=since + timedelta(seconds=151)) == 1
    assert statuses(patient) == ["pending"]


def test_the_celery_task_runs_the_watchdog(tenant):
    node = make_node(cards=1)
    victim = placed_task(tenant=tenant, node=node, gpus=[0], status="preempting")
    Task.objects.filter(id=victim.id).update(status_changed_at=timezone.now() - timedelta(seconds=90))

    assert run_periodic_job.apply(args=("watchdog",)).get() == "1 unconfirmed preemption(s) settled"
    assert statuses(victim) == ["pending"]


def status_report(client, task_id: int, to: str):
    return client.post(f"/api/v1/agent/tasks/{task_id}/status", {"from": "preempting", "to": to}, format="json")


def test_the_agents_report_settles_through_the_status_route(tenant):
    node, token = agent_register(name="gpu-a", internal_ip="10.0.3.7/24", public_ip=None, cpu_cores=8, memory_gb=64)
    victim = placed_task(tenant=tenant, node=node, gpus=[0, 1], status="preempting")
    agent = node_client(token)

    assert status_report(agent, victim.id, "stopped").status_code == 400
    assert statuses(victim) == ["preempting"]
    assert status_report(agent, victim.id, "pending").status_code == 200
    victim.refresh_from_db()
    assert (victim.status, victim.preempt_count, victim.preemptible) == ("pending", 1, False)
    assert status_report(agent, victim.id, "pending").status_code == 409


def test_a_victim_that_exits_cleanly_during_its_preemption_settles_as_preempted(tenant):
    """The agent reports the exit it saw (`running → succeeded`) before it heard of the preemption: the victim is
    never `succeeded` (design §16.1); it goes back to the queue like any victim, exit code on its timeline."""
    node, token = agent_register(name="gpu-a", internal_ip="10.0.3.7/24", public_ip=None, cpu_cores=8, memory_gb=64)
    victim = placed_task(tenant=tenant, node=node, gpus=[0, 1], status="preempting")
    agent = node_client(token)

    exit_report = {"from": "running", "to": "succeeded"}
    assert agent.post(f"/api/v1/agent/tasks/{victim.id}/status", exit_report, format="json").status_code == 200
    victim.refresh_from_db()
    assert (victim.status, victim.preempt_count, victim.preemptible) == ("pending", 1, False)
    last = TaskEvent.objects.filter(task_id=victim.id).latest("id")
    assert (last.from_status, last.to_status) == ("preempting", "pending") and "exit code 0" in last.reason
    assert Node.objects.get(id=node.id).gpu_used == 0
    assert status_report(agent, victim.id, "pending").status_code == 409
    assert preemption_watchdog(now=timezone.now() + timedelta(seconds=61)) == 0


def test_the_agent_may_never_report_a_victim_succeeded(tenant):
    node, token = agent_register(name="gpu-a", internal_ip="10.0.3.7/24", public_ip=None, cpu_cores=8, memory_gb=64)
    victim = placed_task(tenant=tenant, node=node, gpus=[0, 1], status="preempting")

    assert status_report(node_client(token), victim.id, "succeeded").status_code == 400
    assert statuses(victim) == ["preempting"]


def test_a_victim_that_crashed_during_its_preemption_fails(tenant):
    node, token = agent_register(name="gpu-a", internal_ip="10.0.3.7/24", public_ip=None, cpu_cores=8, memory_gb=64)
    victim = placed_task(tenant=tenant, node=node, gpus=[0, 1], status="preempting")

    crash = {"from": "running", "to": "failed", "reason": "exit code 137"}
    assert node_client(token).post(f"/api/v1/agent/tasks/{victim.id}/status", crash, format="json").status_code == 200
    victim.refresh_from_db()
    assert (victim.status, victim.preempt_count, victim.reason) == ("failed", 0, "exit code 137")


def test_a_late_report_after_the_watchdog_settles_nothing(tenant):
    node, token = agent_register(name="gpu-a", internal_ip="10.0.3.7/24", public_ip=None, cpu_cores=8, memory_gb=64)
    victim = placed_task(tenant=tenant, node=node, gpus=[0, 1], status="preempting")
    assert preemption_watchdog(now=timezone.now() + timedelta(seconds=61)) == 1

    assert status_report(node_client(token), victim.id, "pending").status_code == 409

    victim.refresh_from_db()
    assert (victim.status, victim.preempt_count) == ("pending", 1)
    assert Node.objects.get(id=node.id).gpu_used == 0
    assert TaskEvent.objects.filter(task_id=victim.id, to_status="pending").count() == 1


def race_agent_and_watchdog(node: Node, victim_id: int, now) -> dict:
    """The agent's report and a watchdog tick on the same victim, released at once from two threads."""
    start = threading.Barrier(2)
    outcome = {}

    def run(name, settle):
        try:
            start.wait()
            outcome[name] = settle()
        finally:
            connection.close()

    threads = [
        threading.Thread(target=run, args=("agent", lambda: agent_report_status(
            node=node, task_id=victim_id, from_status="preempting", to_status="pending"))),
        threading.Thread(target=run, args=("watchdog", lambda: preemption_watchdog(now=now))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcome


@pytest.mark.django_db(transaction=True)
def test_the_agent_and_the_watchdog_racing_settle_exactly_once(tenant):
    node = make_node(cards=8)
    # Cards no victim holds, so a double return of the ledger would show.
    placed_task(tenant=tenant, node=node, gpus=[4, 5, 6, 7], preemptible=False)
    later = timezone.now() + timedelta(hours=1)

    for _ in range(RACE_ROUNDS):
        victim = placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], status="preempting")

        outcome = race_agent_and_watchdog(node, victim.id, later)

        assert int(outcome["agent"]) + outcome["watchdog"] == 1, outcome
        victim.refresh_from_db()
        assert (victim.status, victim.preempt_count, victim.node_id) == ("pending", 1, None)
        assert TaskEvent.objects.filter(task_id=victim.id, to_status="pending").count() == 1
        assert Node.objects.get(id=node.id).gpu_used == 4
