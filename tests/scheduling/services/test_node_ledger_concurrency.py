"""The heartbeat recount must never 'correct' a right ledger while transitions move it."""

import logging
import threading

import pytest
from django.db import DatabaseError, connection
from django.db.models import Sum

from nodes.services import node_heartbeat_apply
from scheduling.housekeeping.node_ledger import node_gpu_used_recount
from scheduling.models import Task
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task
from tests.nodes.conftest import card

ROUNDS = 40


@pytest.mark.django_db(transaction=True)
def test_recount_under_concurrent_transitions_keeps_the_ledger_exact(tenant, caplog):
    node = make_node(cards=8)
    tasks = [make_task(tenant=tenant, gpu_required=1 + i % 2) for i in range(6)]
    errors: list[Exception] = []

    def churn():
        try:
            for _ in range(ROUNDS // 4):
                for task in tasks:
                    assert task_transition(task.id, "pending", "scheduled", node=node, gpus=[0])
                for task in tasks:
                    assert task_transition(task.id, "scheduled", "running")
                for task in tasks:
                    assert task_transition(task.id, "running", "preempting")
                for task in tasks:
                    assert task_transition(task.id, "preempting", "pending")
        except (AssertionError, DatabaseError) as exc:  # surfaced in the main thread
            errors.append(exc)
        finally:
            connection.close()

    def heartbeats():
        try:
            for _ in range(ROUNDS):
                node_heartbeat_apply(node=node, cpu_percent=1, memory_used_mb=1, gpus=[card(i) for i in range(8)],
                                     labels={})
                node_gpu_used_recount(node_id=node.id)
        except DatabaseError as exc:
            errors.append(exc)
        finally:
            connection.close()

    with caplog.at_level(logging.WARNING, logger="scheduling.housekeeping.node_ledger"):
        threads = [threading.Thread(target=churn)] + [threading.Thread(target=heartbeats) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors, errors
    assert "disagreed" not in caplog.text
    node.refresh_from_db()
    active = Task.objects.filter(node=node, status__in=["scheduled", "running", "preempting", "stopping"])
    assert node.gpu_used == (active.aggregate(total=Sum("gpu_required"))["total"] or 0) == 0
