"""Who may open which page: anonymous users are sent to the login page, tenants get 403 on staff pages."""

import pytest

from tests.factories import make_node

PAGES = ["/", "/tasks/", "/tasks/new/", "/diagnostics/", "/nodes/"]
STAFF_PAGES = ["/diagnostics/", "/nodes/"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", PAGES)
def test_anonymous_users_are_sent_to_login(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith(f"/login/?next={path}")


@pytest.mark.django_db
@pytest.mark.parametrize("path", STAFF_PAGES)
def test_tenants_are_refused_staff_pages(tenant_web, path):
    assert tenant_web.get(path).status_code == 403


@pytest.mark.django_db
def test_tenants_are_refused_a_node_page_and_its_forms(tenant_web):
    node = make_node(cards=1)
    assert tenant_web.get(f"/nodes/{node.id}/").status_code == 403
    response = tenant_web.post(f"/nodes/{node.id}/", {"form": "topology", "region": "x", "zone": "", "rack": ""})
    assert response.status_code == 403
    node.refresh_from_db()
    assert node.region == ""


@pytest.mark.django_db
def test_tenants_are_refused_running_a_cycle(tenant_web):
    assert tenant_web.post("/diagnostics/").status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize("path", PAGES)
def test_admins_open_every_page(admin_web, path):
    make_node(cards=2)
    assert admin_web.get(path).status_code == 200


@pytest.mark.django_db
def test_staff_links_are_only_in_the_admin_navigation(tenant_web, admin_web):
    tenant_page = tenant_web.get("/").content.decode()
    admin_page = admin_web.get("/").content.decode()
    for link in ('href="/nodes/"', 'href="/plugins/"', 'href="/diagnostics/"'):
        assert link not in tenant_page
        assert link in admin_page


@pytest.mark.django_db
def test_login_page_signs_in_with_username_and_password(client, tenant_client):
    page = client.get("/login/")
    assert b'name="username"' in page.content and b'name="password"' in page.content
    response = client.post("/login/", {"username": "alice", "password": "tenant-password"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200


@pytest.mark.django_db
def test_logout_ends_the_session(tenant_web):
    assert tenant_web.post("/logout/").status_code == 302
    assert tenant_web.get("/tasks/").status_code == 302


@pytest.mark.django_db
def test_every_page_carries_the_csrf_token_for_htmx(admin_web):
    page = admin_web.get("/tasks/").content.decode()
    assert '<body hx-headers=\'{"X-CSRFToken": "' in page
    assert "django_htmx/htmx-2.min.js" in page and "django_htmx/ext/hx-ws-2.min.js" in page
