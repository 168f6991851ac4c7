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

