import pytest
from django.db import connection

from nodes.models import Node
from scheduling import lifecycle
from scheduling.bench.bind_ceiling import commit_bind, measure_bind_ceiling
from scheduling.models import Task, TaskEvent
from tenants.models import Tenant
from tests.factories import make_node, make_task


@pytest.mark.django_db(transaction=True)
def test_a_bind_commits_the_cas_the_ledger_and_one_timeline_row(tenant):
    node = make_node(cards=0)
    task = make_task(tenant=tenant, gpu_required=1)
    connection.ensure_connection()
    with connection.connection.cursor() as cursor:
        assert commit_bind(cursor, task_id=task.id, node_id=node.id)
        # The compare-and-swap refuses a task that is no longer pending, and then nothing moves.
        assert not commit_bind(cursor, task_id=task.id, node_id=node.id)
    task.refresh_from_db()
    assert (task.status, task.node_id) == (lifecycle.SCHEDULED, node.id)
    assert Node.objects.get(id=node.id).gpu_used == 1
    assert list(TaskEvent.objects.filter(task=task).values_list("from_status", "to_status")) == [
        (lifecycle.PENDING, lifecycle.SCHEDULED)
    ]


@pytest.mark.django_db(transaction=True)
def test_the_measurement_is_bounded_and_leaves_no_rows_behind(tenant):
    ceiling = measure_bind_ceiling(transactions=40, seconds=5.0, nodes=2)
    assert 0 < ceiling.transactions <= 40
    assert ceiling.per_second > 0
    assert list(Tenant.objects.values_list("name", flat=True)) == [tenant.name]
    assert not Node.objects.exists()
    assert not Task.objects.exists()
