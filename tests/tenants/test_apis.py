import pytest

from tenants.models import ShareGroup, TenancyAuditEntry, Tenant

pytestmark = pytest.mark.django_db


def test_admin_reads_one_tenant(admin_client, tenant):
    response = admin_client.get(f"/api/v1/tenants/{tenant.id}")

    assert response.status_code == 200
    assert response.json()["name"] == "acme"


def test_patch_tenant_changes_quota_and_status_and_audits_both_sides(admin_client, admin_user, tenant):
    response = admin_client.patch(f"/api/v1/tenants/{tenant.id}", {"gpu_quota": 4, "status": "inactive"},
                                  format="json")

    assert response.status_code == 200
    assert response.json()["gpu_quota"] == 4
    tenant.refresh_from_db()
    assert (tenant.gpu_quota, tenant.status) == (4, "inactive")
    entry = TenancyAuditEntry.objects.get(action="tenant.update")
    assert entry.actor == admin_user
    assert entry.details == {"before": {"gpu_quota": None, "status": "active"},
                             "after": {"gpu_quota": 4, "status": "inactive"}}


def test_patch_tenant_null_quota_means_unlimited(admin_client):
    tenant = Tenant.objects.create(name="capped", gpu_quota=2)

    response = admin_client.patch(f"/api/v1/tenants/{tenant.id}", {"gpu_quota": None}, format="json")

    assert response.status_code == 200
    tenant.refresh_from_db()
    assert tenant.gpu_quota is None


@pytest.mark.parametrize(
    ("body", "field"),
    [({"gpu_quota": -1}, "gpu_quota"), ({"status": "paused"}, "status"), ({"name": "renamed"}, "name")],
)
def test_patch_tenant_rejects_bad_input_naming_the_field_and_changes_nothing(admin_client, tenant, body, field):
    response = admin_client.patch(f"/api/v1/tenants/{tenant.id}", body, format="json")

    assert response.status_code == 400
    assert field in response.json()["errors"]
    tenant.refresh_from_db()
    assert (tenant.name, tenant.gpu_quota, tenant.status) == ("acme", None, "active")
    assert not TenancyAuditEntry.objects.filter(action="tenant.update").exists()


def test_tenant_routes_are_admin_only(tenant_client, tenant):
    assert tenant_client.get(f"/api/v1/tenants/{tenant.id}").status_code == 403
    assert tenant_client.patch(f"/api/v1/tenants/{tenant.id}", {"gpu_quota": 99}, format="json").status_code == 403
    tenant.refresh_from_db()
    assert tenant.gpu_quota is None


def test_unknown_tenant_is_404(admin_client):
    assert admin_client.patch("/api/v1/tenants/999999", {"gpu_quota": 1}, format="json").status_code == 404


def _group(name, *tenants):
    group = ShareGroup.objects.create(name=name)
    group.tenants.set(tenants)
    return group


def test_put_share_group_replaces_name_and_members_and_audits_both_sides(admin_client, admin_user, tenant,
                                                                          other_tenant):
    third = Tenant.objects.create(name="initech")
    group = _group("ab", tenant, other_tenant)

    response = admin_client.put(f"/api/v1/share-groups/{group.id}", {"name": "ac", "tenants": [tenant.id, third.id]},
                                format="json")

    assert response.status_code == 200
    assert sorted(response.json()["tenants"]) == sorted([tenant.id, third.id])
    group.refresh_from_db()
    assert group.name == "ac"
    assert set(group.tenants.all()) == {tenant, third}
    entry = TenancyAuditEntry.objects.get(action="share_group.update")
    assert entry.actor == admin_user
    assert entry.details == {
        "before": {"name": "ab", "tenants": sorted([tenant.id, other_tenant.id])},
        "after": {"name": "ac", "tenants": sorted([tenant.id, third.id])},
    }


def test_put_share_group_with_unknown_tenant_is_404_and_changes_nothing(admin_client, tenant, other_tenant):
    group = _group("ab", tenant, other_tenant)

    response = admin_client.put(f"/api/v1/share-groups/{group.id}", {"name": "ab", "tenants": [tenant.id, 999999]},
                                format="json")

    assert response.status_code == 404
    assert "tenants" in response.json()["errors"]
    assert set(group.tenants.all()) == {tenant, other_tenant}


def test_put_share_group_refuses_a_taken_name(admin_client, tenant):
    _group("taken")
    group = _group("mine", tenant)

    response = admin_client.put(f"/api/v1/share-groups/{group.id}", {"name": "taken", "tenants": []}, format="json")

    assert response.status_code == 409
    assert "name" in response.json()["errors"]
    group.refresh_from_db()
    assert group.name == "mine"
    assert set(group.tenants.all()) == {tenant}


def test_delete_share_group_removes_it_and_audits_the_members(admin_client, tenant, other_tenant):
    group = _group("ab", tenant, other_tenant)

    response = admin_client.delete(f"/api/v1/share-groups/{group.id}")

    assert response.status_code == 204
    assert not ShareGroup.objects.filter(id=group.id).exists()
    entry = TenancyAuditEntry.objects.get(action="share_group.delete")
    assert entry.details == {"before": {"name": "ab", "tenants": sorted([tenant.id, other_tenant.id])},
                             "after": None}


def test_share_group_routes_are_admin_only(tenant_client, tenant):
    group = _group("ab", tenant)

    assert tenant_client.put(f"/api/v1/share-groups/{group.id}", {"name": "x", "tenants": []},
                             format="json").status_code == 403
    assert tenant_client.delete(f"/api/v1/share-groups/{group.id}").status_code == 403
    assert ShareGroup.objects.filter(id=group.id, name="ab").exists()
