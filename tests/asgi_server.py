"""Daphne serving the project on the test database, in a process of its own, as the Procfile's web process runs."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests
from django.db import connection

from scheduling.bench.database import database_url

PROJECT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def daphne_serving(*, log: Path, **environment: str) -> Iterator[str]:
    """The server's base URL once it answers; its log lines go to `log`."""
    port = _free_port()
    settings_environment = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict["NAME"]),
                            "SECRET_KEY": "asgi-test-secret-key", "DEBUG": "false", **environment}
    with log.open("wb") as output:
        server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                   "heteroflow_site.asgi:application"], cwd=PROJECT, env=settings_environment,
                                  stdout=output, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    requests.get(f"{base}/healthz", timeout=10)
                    break
                except requests.ConnectionError:
                    assert time.monotonic() < deadline and server.poll() is None, log.read_text()
                    time.sleep(0.2)
            yield base
        finally:
            server.terminate()
            server.wait(timeout=30)
