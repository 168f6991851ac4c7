import pytest

from heteroflow_site.errors import DomainError
from scheduling.models import Task
from scheduling.services.task_create import task_create
from tenants.models import Tenant
from tenants.services import tenant_update

pytestmark = pytest.mark.django_db


def test_inactive_tenant_cannot_submit(tenant):
    tenant_update(tenant_id=tenant.id, status=Tenant.Status.INACTIVE)
    tenant.refresh_from_db()

    with pytest.raises(DomainError) as refusal:
        task_create(tenant=tenant, name="late", gpu_required=1)

    assert refusal.value.field == "tenant"
    assert not Task.objects.exists()


def test_inactive_tenant_submission_through_the_api_is_409(tenant_client, tenant):
    tenant_update(tenant_id=tenant.id, status=Tenant.Status.INACTIVE)

    response = tenant_client.post("/api/v1/tasks", {"name": "late", "gpu_required": 1}, format="json")

    assert response.status_code == 409
    assert not Task.objects.exists()


def test_tenant_update_leaves_out_fields_not_given(tenant):
    tenant_update(tenant_id=tenant.id, gpu_quota=3)
    tenant_update(tenant_id=tenant.id, status=Tenant.Status.INACTIVE)

    tenant.refresh_from_db()
    assert (tenant.gpu_quota, tenant.status) == (3, "inactive")

