"""A request whose connection died before its first statement runs once more on a new one
(heteroflow_site.database_retry); one that got further is answered as it ended."""

import logging

import psycopg
import pytest
from django.db import connection
from django.http import HttpResponse
from django.test import RequestFactory

from heteroflow_site.database_retry import DatabaseRetryMiddleware
from scheduling.models import Task
from tenants.models import Tenant

RETRY_LOG = "running the request again on a new connection"


def _terminate(pid: int) -> None:
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as killer:
        killer.execute("SELECT pg_terminate_backend(%s)", [pid])


def _fresh_watched_connection() -> int:
    """The test thread's connection opened anew, so that the retry's statement watch is on it; its backend pid."""
    connection.close()
    connection.ensure_connection()
    return connection.connection.info.backend_pid


@pytest.mark.django_db(transaction=True)
def test_an_api_request_whose_connection_died_before_its_first_statement_is_answered_on_a_new_one(
        tenant_client, caplog):
    assert tenant_client.get("/api/v1/tasks").status_code == 200  # the middleware is loaded
    # The test client keeps the test's connection across requests (it skips Django's checks at request start), as a
    # pool connection that died after its check would be.
    _terminate(_fresh_watched_connection())

    with caplog.at_level(logging.WARNING, logger="heteroflow_site.database_retry"):
        response = tenant_client.get("/api/v1/tasks")

    assert response.status_code == 200
    assert RETRY_LOG in caplog.text


@pytest.mark.django_db(transaction=True)
def test_a_request_whose_connection_dies_after_its_first_statement_is_not_run_again(tenant_client, caplog):
    assert tenant_client.get("/api/v1/tasks").status_code == 200
    pid = _fresh_watched_connection()
    statements = []

    def kill_before_the_second_statement(execute, sql, params, many, context):
        statements.append(sql)
        if len(statements) == 2:
            _terminate(pid)
        return execute(sql, params, many, context)

    with caplog.at_level(logging.WARNING, logger="heteroflow_site.database_retry"), \
            connection.execute_wrapper(kill_before_the_second_statement):
        response = tenant_client.post("/api/v1/tasks", {"name": "t", "type": "batch", "gpu_required": 1},
                                      format="json")

    assert response.status_code == 500
    assert RETRY_LOG not in caplog.text
    connection.close()
    assert not Task.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_second_lost_connection_is_answered_as_it_is():
    calls = []

    def view(request):
        calls.append(request.body)
        _terminate(_fresh_watched_connection())
        Tenant.objects.count()

    def inner(request):
        try:
            return view(request)
        except Exception:
            return HttpResponse(status=500)

    middleware = DatabaseRetryMiddleware(inner)
    response = middleware(RequestFactory().post("/x", b"body", content_type="text/plain"))

    connection.close()
    assert response.status_code == 500
    assert calls == [b"body", b"body"], "the retry read the body again"
