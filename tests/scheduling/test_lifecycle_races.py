"""Races of design §15.4 with real threads on PostgreSQL: each settles exactly once, and afterwards both GPU ledgers
agree (design §7) whichever side won."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from heteroflow_site.errors import DomainError
from nodes.models import Node
from nodes.services import node_heartbeat_apply
from scheduling.cycle.run import run_cycle
from scheduling.models import Task, TaskEvent
from scheduling.housekeeping.node_lost import release_lost_nodes
from scheduling.preemption.watchdog import preemption_watchdog
from scheduling.services.agent_reports import agent_report_status
from scheduling.services.task_stop import task_stop
from tests.factories import ledger_mismatches, make_node, make_task
from tests.nodes.conftest import card
from tests.scheduling.preemption.conftest import placed_task

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 8


def race(*sides, lag: float = 0.0):
    """Run the callables at the same moment, each in its own thread and connection, the last one `lag` seconds
    after the others (rounds vary it so that every interleaving comes up); their results in order."""
    barrier = threading.Barrier(len(sides))
    results: list = [None] * len(sides)
    errors: list[BaseException] = []

    def run(position, side):
        try:
            barrier.wait()
            if position == len(sides) - 1 and lag:
                time.sleep(lag)
            results[position] = side()
        except BaseException as exc:  # surfaced in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(position, side)) for position, side in enumerate(sides)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    return results


def arcs(task: Task) -> list[tuple[str, str]]:
    return list(TaskEvent.objects.filter(task=task).order_by("id").values_list("from_status", "to_status"))


def test_agent_claim_against_the_node_lost_sweep(tenant):
    for _ in range(ROUNDS):
        node = make_node(cards=2, status="offline", last_heartbeat_at=timezone.now() - timedelta(hours=1))
        task = placed_task(tenant=tenant, node=node, gpus=[0], status="scheduled")

        claimed, swept = race(
            lambda: agent_report_status(node=node, task_id=task.id, from_status="scheduled", to_status="running"),
            release_lost_nodes,
        )

        task.refresh_from_db()
        if claimed:  # the agent started it first: the sweep then fails it, once
            assert (task.status, task.reason) == ("failed", "NodeLost")
            assert arcs(task)[1:] == [("scheduled", "running"), ("running", "failed")]
            assert swept.failed == 1
        else:
            assert task.status == "pending"
            assert arcs(task)[1:] == [("scheduled", "pending")]
            assert swept.requeued == 1
        assert Node.objects.get(id=node.id).gpu_used == 0
        assert ledger_mismatches() == []


def test_user_stop_against_the_agents_exit_report(tenant):
    node = make_node(cards=2)
    for round_number in range(ROUNDS):
        task = placed_task(tenant=tenant, node=node, gpus=[0])

        def stop():
            try:
                return task_stop(task=Task.objects.get(id=task.id)).status
            except DomainError:
                return "refused"

        stopped, reported = race(
            stop,
            lambda: agent_report_status(node=node, task_id=task.id, from_status="running", to_status="succeeded"),
            lag=round_number * 0.004,
        )

        task.refresh_from_db()
        if reported:
            assert (task.status, stopped) == ("succeeded", "refused")
            assert arcs(task)[2:] == [("running", "succeeded")]
        else:
            assert (task.status, stopped) == ("stopping", "stopping")
            assert arcs(task)[2:] == [("running", "stopping")]
            assert agent_report_status(node=node, task_id=task.id, from_status="stopping", to_status="stopped")
        assert ledger_mismatches() == []
    assert Node.objects.get(id=node.id).gpu_used == 0


def test_a_heartbeat_removing_a_card_against_a_bind_onto_it(tenant):
    for round_number in range(ROUNDS):
        node = make_node(cards=2)
        placed_task(tenant=tenant, node=node, gpus=[0])  # card 0 is taken: the only place for the task is card 1
        task = make_task(tenant=tenant, gpu_required=1, gpu_type="nvidia")

        race(
            run_cycle,
            lambda: node_heartbeat_apply(node=node, cpu_percent=5, memory_used_mb=1024,
                                         gpus=[{**card(0), "uuid": f"{node.name}-gpu-0"}], labels={}),
            lag=round_number * 0.03,
        )

        task.refresh_from_db()
        bound = [arc for arc in arcs(task) if arc == ("pending", "scheduled")]
        if task.status == "scheduled":  # bound before the card left: onto card 1, once
            assert (bound, task.gpus) == ([("pending", "scheduled")], [1])
        else:  # the card was gone at bind time: nothing was held
            assert (task.status, bound, task.node_id) == ("pending", [], None)
        node.refresh_from_db()
        assert node.gpu_total == 1
        assert ledger_mismatches() == []
        # Out of the next round's way: its node is cordoned, a task left pending is withdrawn.
        Node.objects.filter(id=node.id).update(schedulable=False)
        Task.objects.filter(id=task.id, status="pending").update(status="stopped")


def test_the_preemption_watchdog_against_the_victim_finishing(tenant):
    node = make_node(cards=2)
    for _ in range(ROUNDS):
        victim = placed_task(tenant=tenant, node=node, gpus=[0, 1], status="preempting")

        settled, reported = race(
            lambda: preemption_watchdog(now=timezone.now() + timedelta(seconds=61)),
            lambda: agent_report_status(node=node, task_id=victim.id, from_status="running",
                                        to_status="succeeded"),
        )

        victim.refresh_from_db()
        # Whoever wins, the victim is settled once as preempted, never `succeeded` (design §16.1).
        assert (settled, reported) in ((1, False), (0, True))
        assert (victim.status, victim.preempt_count) == ("pending", 1)
        assert arcs(victim)[-1] == ("preempting", "pending")
        assert [arc for arc in arcs(victim) if arc[0] == "preempting"] == [("preempting", "pending")]
        Task.objects.filter(id=victim.id).update(status="stopped")  # out of the next round's way
        assert Node.objects.get(id=node.id).gpu_used == 0
        assert ledger_mismatches() == []
