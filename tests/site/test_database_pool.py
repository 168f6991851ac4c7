"""The web server's connection pool (settings `DATABASE_POOL`, on in the Procfile's web process): under ASGI each
request runs in a thread of its own, so without the pool every request opens a PostgreSQL connection."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from django.db import connection

from scheduling.bench.database import database_url

PROJECT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _server_connections(database: str) -> list[tuple[int, float]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, extract(epoch FROM backend_start) FROM pg_stat_activity "
                       "WHERE datname = %s AND pid <> pg_backend_pid()", [database])
        return cursor.fetchall()


def _serve_and_ask(pool: bool, requests_sent: int) -> tuple[float, list[tuple[int, float]]]:
    """Start Daphne on the test database, send requests that read it one after another; the time the last
    one was sent and the connections the server keeps open afterwards."""
    database, port = connection.settings_dict["NAME"], _free_port()
    environment = {**os.environ, "DATABASE_URL": database_url(database), "SECRET_KEY": "pool-test-secret-key",
                   "DEBUG": "false", "DATABASE_POOL": str(pool).lower()}
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                               "heteroflow_site.asgi:application"], cwd=PROJECT, env=environment,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(f"{base}/readyz", timeout=10)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline and server.poll() is None, "the server did not start"
                time.sleep(0.2)
        last_sent = 0.0
        for _ in range(requests_sent):
            last_sent = time.time()
            requests.get(f"{base}/readyz", timeout=10)
        return last_sent, _server_connections(database)
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.django_db
def test_the_pooled_web_server_serves_many_requests_on_a_few_connections_opened_before_them():
    last_sent, kept = _serve_and_ask(pool=True, requests_sent=15)

    assert 1 <= len(kept) <= 16
    assert all(started < last_sent for _, started in kept), "the last request found its connection in the pool"


@pytest.mark.django_db
def test_without_the_pool_each_request_closes_the_connection_it_opened():
    _, kept = _serve_and_ask(pool=False, requests_sent=5)

    assert kept == []
