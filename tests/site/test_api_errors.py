"""Every response under /api/ is JSON a client can read (issue 13 item 6); pages keep their HTML."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from heteroflow_site.api_errors import exception_handler
from tests.site.test_abuse_limits import low_rates  # noqa: F401 (fixture)


def _is_error_body(response, status: int, code: str) -> None:
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert body["code"] == code and body["message"]


@pytest.mark.django_db
def test_an_unknown_api_route_is_a_json_404_and_an_unknown_page_stays_html(admin_client):
    _is_error_body(admin_client.get("/api/v1/no-such-thing"), 404, "not_found")
    page = Client().get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_405_401_403_and_404_of_api_views_are_json(admin_client, tenant_client):
    _is_error_body(admin_client.delete("/api/v1/tasks"), 405, "method_not_allowed")
    _is_error_body(APIClient().get("/api/v1/tasks"), 401, "not_authenticated")
    _is_error_body(tenant_client.get("/api/v1/tenants"), 403, "permission_denied")
    _is_error_body(admin_client.get("/api/v1/tasks/987654"), 404, "not_found")


@pytest.mark.django_db
def test_a_400_names_the_field(tenant_client):
    response = tenant_client.post("/api/v1/tasks", {"name": "x", "priority": 500}, format="json")
    _is_error_body(response, 400, "max_value")
    assert response.json()["field"] == "priority" and "priority" in response.json()["message"]


@pytest.mark.django_db
def test_a_429_is_json(tenant_client, low_rates):
    for _ in range(3):
        tenant_client.get("/api/v1/tasks")
    _is_error_body(tenant_client.get("/api/v1/tasks"), 429, "throttled")


def test_an_unexpected_error_is_a_logged_json_500(caplog):
    class Boom:
        pass

    response = exception_handler(ZeroDivisionError("boom"), {"view": Boom()})
    assert response.status_code == 500 and response.data == {"code": "server_error", "message": "internal server error"}
    assert "unhandled error in Boom" in caplog.text


def test_an_unexpected_error_in_a_view_reaches_the_client_as_json(monkeypatch, db, admin_client):
    from scheduling.api import task_apis as apis

    def explode(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(apis, "tasks_visible_to", explode)
    _is_error_body(admin_client.get("/api/v1/tasks"), 500, "server_error")
