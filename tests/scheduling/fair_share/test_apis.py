"""The API of quota sharing (design §16.2): quotas, cohorts, the priority ceiling; refusals name the field and
change nothing."""

from decimal import Decimal

import pytest

from scheduling import lifecycle
from tenants.models import Cohort, TenancyAuditEntry, Tenant, TenantGpuQuota
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db

LINES = [{"gpu_type": "nvidia", "nominal": 4, "lending_limit": 2}, {"gpu_type": "ascend", "nominal": 1.5}]


def test_put_replaces_the_tenants_quotas_and_get_shows_used_and_borrowed(admin_client, tenant):
    node = make_node(cards=8, memory_mb=81920)
    make_task(tenant=tenant, gpu_type="nvidia", gpu_required=1, status=lifecycle.RUNNING, node=node, gpus=[0],
              card_type="nvidia")
    make_task(tenant=tenant, gpu_type="nvidia", gpu_required=2, status=lifecycle.RUNNING, node=node, gpus=[1, 2],
              card_type="nvidia", borrowed=True)
    make_task(tenant=tenant, gpu_memory_mb=20480, status=lifecycle.RUNNING, node=node, gpus=[3], card_type="nvidia",
              shard={"card": 3, "memory_limit_mb": 20480, "compute_percent": 25})

    response = admin_client.put(f"/api/v1/tenants/{tenant.id}/quotas", LINES, format="json")

    assert response.status_code == 200, response.json()
    assert response.json() == [
        {"gpu_type": "ascend", "nominal": "1.50", "borrowing_limit": None, "lending_limit": None, "used": "0.00",
         "borrowed": "0.00", "lent": "0.00"},
        {"gpu_type": "nvidia", "nominal": "4.00", "borrowing_limit": None, "lending_limit": "2.00",
         "used": "3.25", "borrowed": "2.00", "lent": "0.00"},
    ]
    assert admin_client.get(f"/api/v1/tenants/{tenant.id}/quotas").json() == response.json()
    assert TenancyAuditEntry.objects.filter(action="tenant.quotas").count() == 1

    assert admin_client.put(f"/api/v1/tenants/{tenant.id}/quotas", [], format="json").status_code == 200
    assert not TenantGpuQuota.objects.exists()


@pytest.mark.parametrize("line, field, status", [
    ({"gpu_type": "nvidia", "nominal": -1}, "nominal", 400),
    ({"gpu_type": "nvidia", "nominal": "NaN"}, "nominal", 400),
    ({"gpu_type": "nvidia", "nominal": "Infinity"}, "nominal", 400),
    ({"gpu_type": "nvidia", "nominal": 1_000_001}, "nominal", 400),
    ({"gpu_type": "tpu", "nominal": 1}, "gpu_type", 400),
    ({"gpu_type": "nvidia", "nominal": 1, "borrowing_limit": -2}, "borrowing_limit", 400),
    ({"gpu_type": "nvidia", "nominal": 1, "lending_limit": 3}, "lending_limit", 403),  # a rule across fields
    ({"gpu_type": "nvidia", "nominal": 1, "burst": 3}, "burst", 400),
])
def test_bad_quota_lines_are_refused_naming_the_field_and_change_nothing(admin_client, tenant, line, field, status):
    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="musa", nominal=2)

    response = admin_client.put(f"/api/v1/tenants/{tenant.id}/quotas", [line], format="json")

    assert response.status_code == status
    assert response.json()["field"].split(".")[-1] == field
    assert list(TenantGpuQuota.objects.values_list("gpu_type", "nominal")) == [("musa", 2)]


def test_a_type_listed_twice_is_a_403(admin_client, tenant):
    response = admin_client.put(f"/api/v1/tenants/{tenant.id}/quotas",
                                [{"gpu_type": "nvidia", "nominal": 1}, {"gpu_type": "nvidia", "nominal": 2}],
                                format="json")
    assert response.status_code == 403 and response.json()["field"] == "[1].gpu_type"
    assert not TenantGpuQuota.objects.exists()


def test_only_admins_see_or_change_quotas_and_cohorts(tenant_client, tenant):
    assert tenant_client.get(f"/api/v1/tenants/{tenant.id}/quotas").status_code == 403
    assert tenant_client.put(f"/api/v1/tenants/{tenant.id}/quotas", LINES, format="json").status_code == 403
    assert tenant_client.post("/api/v1/cohorts", {"name": "x", "tenants": [tenant.id]},
                              format="json").status_code == 403
    assert not TenantGpuQuota.objects.exists() and not Cohort.objects.exists()


def test_cohorts_are_created_changed_and_deleted(admin_client, tenant, other_tenant):
    third = Tenant.objects.create(name="initech")
    created = admin_client.post("/api/v1/cohorts", {"name": "research", "tenants": [tenant.id, other_tenant.id]},
                                format="json")
    assert created.status_code == 201
    cohort_id = created.json()["id"]
    assert sorted(created.json()["tenants"]) == [tenant.id, other_tenant.id]

    changed = admin_client.patch(f"/api/v1/cohorts/{cohort_id}", {"tenants": [other_tenant.id, third.id]},
                                 format="json")
    assert changed.status_code == 200
    assert sorted(changed.json()["tenants"]) == [other_tenant.id, third.id]
    assert Tenant.objects.get(id=tenant.id).cohort is None
    assert admin_client.get("/api/v1/cohorts").json()[0]["name"] == "research"

    assert admin_client.delete(f"/api/v1/cohorts/{cohort_id}").status_code == 204
    assert not Tenant.objects.filter(cohort__isnull=False).exists()


def test_a_tenant_in_two_cohorts_is_a_409_naming_tenants(admin_client, tenant, other_tenant):
    admin_client.post("/api/v1/cohorts", {"name": "research", "tenants": [tenant.id]}, format="json")

    response = admin_client.post("/api/v1/cohorts", {"name": "ops", "tenants": [other_tenant.id, tenant.id]},
                                 format="json")

    assert response.status_code == 409 and response.json()["field"] == "tenants"
    assert list(Cohort.objects.values_list("name", flat=True)) == ["research"]
    assert Tenant.objects.get(id=other_tenant.id).cohort is None


def test_patch_sets_max_priority_within_0_to_100(admin_client, tenant):
    response = admin_client.patch(f"/api/v1/tenants/{tenant.id}", {"max_priority": 30}, format="json")
    assert response.status_code == 200 and response.json()["max_priority"] == 30

    for bad in (101, -1, "high"):
        refused = admin_client.patch(f"/api/v1/tenants/{tenant.id}", {"max_priority": bad}, format="json")
        assert refused.status_code == 400 and refused.json()["field"] == "max_priority"
    assert Tenant.objects.get(id=tenant.id).max_priority == 30


def test_cards_are_kept_to_hundredths(admin_client, tenant):
    """A JSON number has no "two decimals" a schema could require: more are rounded, half up."""
    response = admin_client.put(f"/api/v1/tenants/{tenant.id}/quotas", [{"gpu_type": "nvidia", "nominal": 1.005}],
                                format="json")

    assert response.status_code == 200, response.content
    assert TenantGpuQuota.objects.get().nominal == Decimal("1.01")
