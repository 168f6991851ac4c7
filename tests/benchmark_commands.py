"""Runs a benchmark command as the operator does, in its own process, against the test database's server."""

import os
import subprocess
import sys
from pathlib import Path

from django.db import connection

from scheduling.bench.database import database_url

MANAGE_PY = Path(__file__).resolve().parents[1] / "manage.py"


def run_benchmark(*arguments: str) -> str:
    """The command's standard output; it fails the test on a non-zero exit. The benchmark creates its throwaway
    database next to the test database and drops it."""
    environment = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict["NAME"]),
                   "SECRET_KEY": "benchmark-test-secret-key", "DEBUG": "false"}
    finished = subprocess.run([sys.executable, str(MANAGE_PY), *arguments], env=environment, capture_output=True,
                              text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]
    return finished.stdout


def benchmark_databases_left() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE 'hf_bench_%%'")
        return [name for (name,) in cursor.fetchall()]
