import pytest
from rest_framework.test import APIClient

from tenants.models import ShareGroup, TenancyAuditEntry, Tenant


@pytest.mark.django_db
def test_admin_creates_a_tenant_and_a_user_whose_token_works(admin_client):
    tenant = admin_client.post("/api/v1/tenants", {"name": "umbrella", "gpu_quota": 16}, format="json")
    assert tenant.status_code == 201
    user = admin_client.post(f"/api/v1/tenants/{tenant.data['id']}/users",
                             {"username": "umbrella-ops", "password": "long-password"}, format="json")
    assert user.status_code == 201
    assert set(user.data) == {"id", "username", "token"}

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {user.data['token']}")
    created = client.post("/api/v1/tasks", {"name": "job", "gpu_required": 1}, format="json")
    assert created.status_code == 201
    assert created.data["tenant"] == tenant.data["id"]
    assert TenancyAuditEntry.objects.filter(action="membership.add", target="umbrella").exists()


@pytest.mark.django_db
def test_share_groups_are_created_with_their_tenants(admin_client, tenant, other_tenant):
    response = admin_client.post("/api/v1/share-groups", {"name": "lab", "tenants": [tenant.id, other_tenant.id]},
                                 format="json")

    assert response.status_code == 201
    assert sorted(response.data["tenants"]) == sorted([tenant.id, other_tenant.id])
    assert admin_client.get("/api/v1/share-groups").data[0]["name"] == "lab"


@pytest.mark.django_db
def test_tenancy_routes_are_admin_only(tenant_client, tenant):
    assert tenant_client.get("/api/v1/tenants").status_code == 403
    assert tenant_client.post("/api/v1/tenants", {"name": "x"}, format="json").status_code == 403
    assert tenant_client.post(f"/api/v1/tenants/{tenant.id}/users", {"username": "u", "password": "p" * 8},
                              format="json").status_code == 403
    assert tenant_client.post("/api/v1/share-groups", {"name": "g", "tenants": []}, format="json").status_code == 403
    assert Tenant.objects.count() == 1 and not ShareGroup.objects.exists()


@pytest.mark.django_db
def test_bad_tenancy_input_names_the_field_and_changes_nothing(admin_client, tenant):
    def refused_fields(url, body):
        return admin_client.post(url, body, format="json").data["errors"]

    assert "gpu_quota" in refused_fields("/api/v1/tenants", {"name": "x", "gpu_quota": -1})
    assert "colour" in refused_fields("/api/v1/tenants", {"name": "x", "colour": "red"})
    assert "name" in refused_fields("/api/v1/tenants", {"name": tenant.name})
    assert "tenants" in refused_fields("/api/v1/share-groups", {"name": "g", "tenants": [999]})
    assert Tenant.objects.count() == 1 and not ShareGroup.objects.exists()
