import pytest

from heteroflow_site.errors import DomainError
from scheduling.queue import immediate_queue
from scheduling.models import Task
from scheduling.services.task_create import task_create
from tenants.models import Tenant


@pytest.mark.django_db(transaction=True)
def test_created_task_is_pending_and_offered_to_the_immediate_queue(tenant):
    task = task_create(tenant=tenant, name="train", gpu_required=2)

    assert task.status == "pending"
    assert immediate_queue.drain() == [task.id]


@pytest.mark.django_db(transaction=True)
def test_immediate_queue_is_bounded_and_a_full_queue_does_not_refuse_the_task(tenant):
    redis = immediate_queue.connection()
    redis.rpush(immediate_queue.QUEUE_KEY, *range(immediate_queue.QUEUE_CAPACITY))

    task = task_create(tenant=tenant, name="overflow")

    assert immediate_queue.length() == immediate_queue.QUEUE_CAPACITY
    assert Task.objects.filter(id=task.id, status="pending").exists()


@pytest.mark.django_db
def test_training_cannot_be_preemptible(tenant):
    with pytest.raises(DomainError) as refused:
        task_create(tenant=tenant, name="t", type="training", preemptible=True)
    assert refused.value.field == "preemptible"
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_inactive_tenant_cannot_submit():
    tenant = Tenant.objects.create(name="dormant", status=Tenant.Status.INACTIVE)
    with pytest.raises(DomainError) as refused:
        task_create(tenant=tenant, name="t")
    assert refused.value.field == "tenant"
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_compute_percent_only_for_fractional_tasks(tenant):
    with pytest.raises(DomainError) as refused:
        task_create(tenant=tenant, name="t", gpu_required=1, gpu_memory_mb=4096, gpu_compute_percent=50)
    assert refused.value.field == "gpu_compute_percent"

    shard = task_create(tenant=tenant, name="s", gpu_memory_mb=4096, gpu_compute_percent=50)
    assert shard.is_fractional


@pytest.mark.django_db
def test_memory_with_whole_cards_is_an_admission_condition_not_a_fraction(tenant):
    task = task_create(tenant=tenant, name="t", gpu_required=2, gpu_memory_mb=40000)
    assert not task.is_fractional
    assert task_create(tenant=tenant, name="f", gpu_required=0, gpu_memory_mb=4000).is_fractional
