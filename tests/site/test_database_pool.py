"""The web server's connection pool (settings `DATABASE_POOL`, on in the Procfile's web process): under ASGI each
request runs in a thread of its own, so without the pool every request opens a PostgreSQL connection."""

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from django.db import connection

from tenants.services import tenant_user_create
from tests.processes import daphne_serving


def _server_connections(application_name: str) -> list[tuple[int, float]]:
    """The server's open connections, told from any other by the name libpq gives them (`PGAPPNAME`). A test runs in
    one transaction, which keeps the first pg_stat_activity it read: each call reads it afresh."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT pid, extract(epoch FROM backend_start) FROM pg_stat_activity "
                       "WHERE application_name = %s", [application_name])
        return cursor.fetchall()


def _ask(base: str, requests_sent: int) -> float:
    """Requests that read the database, one after another; when the last one was sent."""
    last_sent = 0.0
    for _ in range(requests_sent):
        last_sent = time.time()
        requests.get(f"{base}/readyz", timeout=10)
    return last_sent


@pytest.mark.django_db
def test_the_pooled_web_server_serves_many_requests_on_a_few_connections_opened_before_them(tmp_path):
    name = f"pool-test-{uuid.uuid4().hex[:8]}"
    with daphne_serving(log=tmp_path / "server.log", DATABASE_POOL="true", PGAPPNAME=name) as base:
        last_sent = _ask(base, 15)
        kept = _server_connections(name)

    assert 1 <= len(kept) <= 16
    assert all(started < last_sent for _, started in kept), "the last request found its connection in the pool"


@pytest.mark.django_db
def test_without_the_pool_each_request_closes_the_connection_it_opened(tmp_path):
    name = f"pool-test-{uuid.uuid4().hex[:8]}"
    with daphne_serving(log=tmp_path / "server.log", DATABASE_POOL="false", PGAPPNAME=name) as base:
        _ask(base, 5)
        # Django closes a request's connection on request_finished, after the response went out: allow it a moment,
        # a long one on a loaded machine (a kept connection stays for good, so the wait changes no verdict).
        deadline = time.monotonic() + 30
        while (kept := _server_connections(name)) and time.monotonic() < deadline:
            time.sleep(0.05)

    assert kept == []


def terminate_every_backend() -> int:
    """What a restart, a failover or a connection-killing proxy does to the database's sessions; how many ended."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0]


def answers_after_termination(base: str, token: str) -> tuple[list[int], list[int]]:
    """The pool warmed by 40 requests at once, every backend terminated, then 30 API requests one after another:
    the warm-up's statuses and the 30's."""
    headers = {"Authorization": f"Token {token}"}

    def ask(_) -> int:
        return requests.get(f"{base}/api/v1/tasks", headers=headers, timeout=30).status_code

    with ThreadPoolExecutor(40) as requests_at_once:
        warm_up = list(requests_at_once.map(ask, range(40)))
    assert terminate_every_backend() >= 2
    return warm_up, [ask(n) for n in range(30)]


@pytest.mark.django_db(transaction=True)
def test_after_every_backend_is_terminated_a_warmed_pool_answers_every_api_request(tmp_path, tenant):
    _, token = tenant_user_create(tenant=tenant, username="pool-user", password="orchid-lantern-42")
    with daphne_serving(log=tmp_path / "server.log", DATABASE_POOL="true") as base:
        warm_up, after = answers_after_termination(base, token)
        assert terminate_every_backend() >= 2
        ready = requests.get(f"{base}/readyz", timeout=30).json()

    assert warm_up == [200] * 40
    assert after == [200] * 30, (tmp_path / "server.log").read_text()[-3000:]
    assert ready["checks"]["database"]["status"] == "ok", ready
