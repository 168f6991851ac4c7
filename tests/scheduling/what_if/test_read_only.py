import pytest
from django.db import InternalError

from scheduling.models import Task
from scheduling.what_if.read_only import read_only_transaction
from tests.factories import make_task


@pytest.mark.django_db(transaction=True)
def test_the_preview_transaction_refuses_writes(tenant):
    task = make_task(tenant=tenant, gpu_required=1)

    with pytest.raises(InternalError, match="read-only transaction"), read_only_transaction():
        Task.objects.filter(id=task.id).update(priority=99)

    assert Task.objects.get(id=task.id).priority == task.priority



@pytest.mark.django_db(transaction=True)
def test_the_preview_transaction_begins_with_its_first_read_and_leaves_the_connection_as_it_found_it():
    """issue 47: a preview that reads nothing sends nothing (the page of a pending task plans on a cluster it has
    already read), and one that reads begins REPEATABLE READ, READ ONLY in one BEGIN."""
    from django.db import connection
    from psycopg.pq import TransactionStatus

    def setting(name: str) -> str:
        with connection.cursor() as cursor:
            cursor.execute(f"SHOW {name}")
            return cursor.fetchone()[0]

    with read_only_transaction():
        assert connection.connection.info.transaction_status == TransactionStatus.IDLE
        assert (setting("transaction_isolation"), setting("transaction_read_only")) == ("repeatable read", "on")
    assert (setting("transaction_isolation"), setting("transaction_read_only")) == ("read committed", "off")
    Task.objects.update(priority=1)
