"""The node change log (triggers in the same transaction as the change) and `nodes_changed_since`.

Transactional tests: the log keys on committed transactions, and inside one test transaction every change would
belong to the same transaction as the look.
"""

from datetime import timedelta

import psycopg
import pytest
from django.db import connection, transaction
from django.utils import timezone

from nodes.models import GPU, NodeChange
from nodes.selectors import nodes_changed_since
from nodes.services import node_changes_prune, node_heartbeat_apply, node_update
from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.services.agent_reports import agent_report_status
from scheduling.services.task_create import task_create
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task
from tests.nodes.conftest import card

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def node():
    return make_node(cards=4)


@pytest.fixture
def bystander():
    """A node nothing in the test touches: it must not show up as changed."""
    return make_node(cards=4)


def _changed_by(change) -> frozenset[int]:
    watermark = nodes_changed_since(since=None).watermark
    change()
    return nodes_changed_since(since=watermark).node_ids


def test_a_heartbeat_logs_its_node(node, bystander):
    assert _changed_by(lambda: node_heartbeat_apply(node=node, cpu_percent=33.0, memory_used_mb=2048,
                                                    gpus=[card(index) for index in range(4)], labels={})) == {node.id}


def test_a_label_edit_logs_its_node(node, bystander):
    assert _changed_by(lambda: node_update(node=node, labels={"rdma": "true"})) == {node.id}


def test_a_card_removed_or_reporting_new_figures_logs_its_node(node, bystander):
    assert _changed_by(lambda: GPU.objects.filter(node=node, index=3).delete()) == {node.id}
    assert _changed_by(lambda: GPU.objects.filter(node=node, index=0).update(temperature=80)) == {node.id}


def test_a_bind_by_the_cycle_logs_the_node_it_chose(node, bystander, tenant):
    task = make_task(tenant=tenant, gpu_required=2)
    changed = _changed_by(run_cycle)
    task.refresh_from_db()
    assert task.status == lifecycle.SCHEDULED
    assert changed == {task.node_id}


def test_a_fractional_placement_logs_its_node_though_no_ledger_moves(node, bystander, tenant):
    task = make_task(tenant=tenant, gpu_memory_mb=4096)
    assert _changed_by(lambda: task_transition(task.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=node, gpus=[1],
                                               shard={"card": 1, "memory_limit_mb": 4096})) == {node.id}


def test_a_task_ending_logs_its_node(node, bystander, tenant):
    task = make_task(tenant=tenant, gpu_required=1)
    assert task_transition(task.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=node, gpus=[0])
    assert task_transition(task.id, lifecycle.SCHEDULED, lifecycle.RUNNING)
    assert _changed_by(lambda: agent_report_status(node=node, task_id=task.id, from_status=lifecycle.RUNNING,
                                                   to_status=lifecycle.SUCCEEDED)) == {node.id}


def test_a_placement_changing_only_its_card_type_logs_its_node(node, bystander, tenant):
    task = make_task(tenant=tenant, gpu_required=1)
    assert task_transition(task.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=node, gpus=[0])
    from scheduling.models import Task

    assert _changed_by(lambda: Task.objects.filter(id=task.id).update(card_type="ascend")) == {node.id}


def test_a_card_changing_its_type_logs_its_node(node, bystander):
    assert _changed_by(lambda: GPU.objects.filter(node=node, index=3).update(type="ascend")) == {node.id}


def test_a_task_moving_between_nodes_logs_both(node, bystander, tenant):
    task = make_task(tenant=tenant, gpu_required=1)
    assert task_transition(task.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=node, gpus=[0])
    from scheduling.models import Task

    assert _changed_by(lambda: Task.objects.filter(id=task.id).update(node=bystander)) == {node.id, bystander.id}


def test_changes_that_touch_no_placement_log_nothing(node, bystander, tenant):
    task = make_task(tenant=tenant, gpu_required=1)
    assert task_transition(task.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=node, gpus=[0])
    from scheduling.models import Task

    def submit_and_rename():
        task_create(tenant=tenant, name="queued", gpu_required=1)
        Task.objects.filter(id=task.id).update(reason="renamed reason only")

    assert _changed_by(submit_and_rename) == frozenset()


def test_a_deleted_node_is_logged(node, bystander):
    node_id = node.id
    assert _changed_by(node.delete) == {node_id}


def test_a_change_committed_after_a_look_is_found_even_if_its_transaction_began_before():
    """Why the log keys on transaction ids and the reader on its snapshot: with a plain sequence, the
    earlier-numbered change committing last would be behind the reader's mark and missed for good."""
    early, late = make_node(cards=1), make_node(cards=1)
    watermark = nodes_changed_since(since=None).watermark
    with psycopg.connect(**connection.get_connection_params()) as writer:
        writer.execute("UPDATE nodes_node SET cpu_percent = 50 WHERE id = %s", [early.id])
        node_update(node=late, schedulable=False)
        first = nodes_changed_since(since=watermark)
        writer.commit()
    second = nodes_changed_since(since=first.watermark)
    assert first.node_ids == {late.id}
    assert early.id in second.node_ids


def test_a_transaction_sees_its_own_changes_after_each_of_its_looks(node, bystander):
    with transaction.atomic():
        node_update(node=bystander, schedulable=False)
        # A transaction id handed out after ours: our own id is then below the snapshots' xmax and not among their
        # running ones, the shape in which PostgreSQL calls it visible to them.
        with psycopg.connect(**connection.get_connection_params()) as other:
            other.execute("SELECT pg_current_xact_id()")
        first = nodes_changed_since(since=None)
        node_update(node=node, labels={"team": "ml"})
        second = nodes_changed_since(since=first.watermark)
    assert node.id in second.node_ids


def test_pruning_forgets_only_old_changes(node, bystander):
    NodeChange.objects.filter(node_id=node.id).update(at=timezone.now() - timedelta(hours=2))
    pruned = node_changes_prune(older_than=timedelta(hours=1))
    assert pruned > 0
    assert not NodeChange.objects.filter(node_id=node.id).exists()
    assert NodeChange.objects.filter(node_id=bystander.id).exists()
