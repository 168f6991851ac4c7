"""The project's commands and servers run in processes of their own, as an operator starts them, against the test
database (and its server, where benchmarks create their throwaway databases)."""

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests
from django.db import connection

from scheduling.bench.database import database_url
from scheduling.bench.network import free_port

PROJECT = Path(__file__).resolve().parents[1]


def process_environment(**extra: str) -> dict[str, str]:
    """The test environment pointed at the test database, with DEBUG off as in production."""
    return {**os.environ, "DATABASE_URL": database_url(connection.settings_dict["NAME"]),
            "SECRET_KEY": "process-test-secret-key-long-enough-for-the-50-character-rule", "DEBUG": "false", **extra}


def run_benchmark(*arguments: str) -> str:
    """The command's standard output; it fails the test on a non-zero exit."""
    finished = subprocess.run([sys.executable, str(PROJECT / "manage.py"), *arguments], env=process_environment(),
                              capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]
    return finished.stdout


def throwaway_databases_left(benchmark_output: str) -> list[str]:
    """The throwaway databases the benchmark named in its output (`database hf_bench_<pid>: …`) that still exist;
    other benchmarks running on the same server at the same time do not count."""
    named = re.findall(r"^database (hf_bench_\d+):", benchmark_output, re.MULTILINE)
    assert named, benchmark_output
    with connection.cursor() as cursor:
        cursor.execute("SELECT datname FROM pg_database WHERE datname = ANY(%s)", [named])
        return [name for (name,) in cursor.fetchall()]


@contextmanager
def daphne_serving(*, log: Path, **environment: str) -> Iterator[str]:
    """Daphne serving the project as the Procfile's web process does; the base URL once it answers, its log lines
    in `log`."""
    port = free_port()
    with log.open("wb") as output:
        server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                   "heteroflow_site.asgi:application"], cwd=PROJECT,
                                  env=process_environment(**environment), stdout=output, stderr=subprocess.STDOUT)
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
