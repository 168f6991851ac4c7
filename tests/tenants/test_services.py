import pytest

from heteroflow_site.errors import DomainError
from scheduling.models import Task
from scheduling.services.task_create import task_create
from tenants.models import ShareGroup, Tenant
from tenants.selectors import tenancy_view
from tenants.services import tenant_update
from tests.factories import make_node

pytestmark = pytest.mark.django_db


def test_inactive_tenant_cannot_submit(tenant):
    tenant_update(tenant_id=tenant.id, status=Tenant.Status.INACTIVE)
    tenant.refresh_from_db()

    with pytest.raises(DomainError) as refusal:
        task_create(tenant=tenant, name="late", gpu_required=1)

    assert refusal.value.field == "tenant"
    assert not Task.objects.exists()


def test_inactive_tenant_submission_through_the_api_is_400(tenant_client, tenant):
    tenant_update(tenant_id=tenant.id, status=Tenant.Status.INACTIVE)

    response = tenant_client.post("/api/v1/tasks", {"name": "late", "gpu_required": 1}, format="json")

    assert response.status_code == 400
    assert not Task.objects.exists()


def test_tenant_update_leaves_out_fields_not_given(tenant):
    tenant_update(tenant_id=tenant.id, gpu_quota=3)
    tenant_update(tenant_id=tenant.id, status=Tenant.Status.INACTIVE)

    tenant.refresh_from_db()
    assert (tenant.gpu_quota, tenant.status) == (3, "inactive")


def test_tenancy_view_reads_groups_and_dedicated_tenants(tenant, other_tenant):
    third = Tenant.objects.create(name="initech")
    first, second = ShareGroup.objects.create(name="g1"), ShareGroup.objects.create(name="g2")
    first.tenants.set([tenant, other_tenant])
    second.tenants.set([other_tenant])
    make_node(cards=1, dedicated_tenant=third)

    view = tenancy_view()

    assert view.groups_of == {tenant.id: frozenset({first.id}), other_tenant.id: frozenset({first.id, second.id})}
    assert view.dedicated_tenant_ids == frozenset({third.id})
