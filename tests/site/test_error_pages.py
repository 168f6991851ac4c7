import pytest
from django.test import Client


@pytest.mark.django_db
def test_a_tenant_refused_an_admin_page_gets_the_styled_403_with_a_way_back(tenant_client):
    client = Client()
    client.force_login(tenant_client.user)

    response = client.get("/plugins/")

    assert response.status_code == 403
    assert b"Not allowed" in response.content and b'href="/tasks/"' in response.content


@pytest.mark.django_db
def test_another_tenants_task_page_is_the_styled_404(tenant_client, other_tenant):
    from tests.factories import make_task

    foreign = make_task(tenant=other_tenant)
    client = Client()
    client.force_login(tenant_client.user)

    response = client.get(f"/tasks/{foreign.id}/")

    assert response.status_code == 404
    assert b"Not found" in response.content
