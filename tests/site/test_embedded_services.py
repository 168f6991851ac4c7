"""The fresh-machine path: with no DATABASE_URL / REDIS_URL the project starts its own PostgreSQL and Redis."""

import signal
import os
from urllib.parse import unquote, urlparse

import psycopg
import pytest
import redis

from heteroflow_site.local_services import start_embedded_postgres, start_embedded_redis


@pytest.mark.embedded
def test_embedded_postgresql_really_starts_and_answers(tmp_path):
    url = start_embedded_postgres(tmp_path / "pg")
    import pgserver  # after the start, which imports it without the runtime-folder warning

    socket_dir = unquote(urlparse(url).hostname or "")
    try:
        with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres") as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
        assert version
    finally:
        server = pgserver.get_server(tmp_path / "pg")
        server.cleanup_mode = "delete"
        server.cleanup()


@pytest.mark.embedded
def test_embedded_redis_really_starts_and_answers(tmp_path):
    url = start_embedded_redis(tmp_path)
    try:
        client = redis.Redis.from_url(url)
        assert client.ping()
        assert start_embedded_redis(tmp_path) == url, "a second caller reuses the running server"
    finally:
        os.kill(int((tmp_path / "redis.pid").read_text()), signal.SIGTERM)


@pytest.mark.embedded
def test_celery_reaches_the_embedded_redis_through_its_socket(tmp_path):
    from kombu import Connection

    from heteroflow_site.local_services import celery_broker_url

    url = start_embedded_redis(tmp_path)
    try:
        with Connection(celery_broker_url(url)) as broker:
            broker.ensure_connection(max_retries=1)
            assert broker.connected
        assert celery_broker_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    finally:
        os.kill(int((tmp_path / "redis.pid").read_text()), signal.SIGTERM)
