"""A configuration error stops a management command with two lines saying what is wrong and how to fix it, and
exit status 1 — no traceback, unless --traceback or DEBUG asks for one (issue 30)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
UNREACHABLE_DATABASE = "postgres://postgres@127.0.0.1:1/heteroflow"


def _manage(tmp_path, *arguments: str, **env: str) -> subprocess.CompletedProcess:
    """manage.py in a process of its own; `tmp_path` is its data folder (no secret key kept there)."""
    environment = {key: value for key, value in os.environ.items() if key not in ("SECRET_KEY", "DEBUG")}
    environment.update({"HETEROFLOW_DATA_DIR": str(tmp_path), "SECRET_KEY": "configuration-test-key-" + "c" * 40, **env})
    return subprocess.run([sys.executable, str(REPOSITORY / "manage.py"), *arguments], env=environment,
                          capture_output=True, text=True, timeout=120)


def _error_lines(finished: subprocess.CompletedProcess) -> list[str]:
    # Django's app registry logs an INFO line of django-axes at start; the error is what follows.
    return [line for line in finished.stderr.splitlines() if " INFO " not in line]


@pytest.mark.parametrize(("env", "named"), [
    ({"SECRET_KEY": ""}, "set SECRET_KEY"),
    ({"REDIS_URL": "localhost:6379"}, "REDIS_URL must start with redis://"),
    ({"DATABASE_URL": "mysql://user@db/heteroflow"}, "DATABASE_URL must name a PostgreSQL database"),
    ({"DATABASE_URL": "postgres://user@db:fivefour/heteroflow"}, "DATABASE_URL is malformed"),
    ({"HETEROFLOW_TOKEN_TTL_DAYS": "ninety"}, "HETEROFLOW_TOKEN_TTL_DAYS='ninety' is malformed"),
    ({"DATABASE_URL": UNREACHABLE_DATABASE}, "cannot connect to PostgreSQL at 127.0.0.1:1/heteroflow (DATABASE_URL)"),
], ids=["secret-key", "redis-url", "not-postgres", "bad-port", "malformed-int", "unreachable-database"])
def test_a_configuration_error_is_two_lines_and_exit_1(tmp_path, env, named):
    finished = _manage(tmp_path, "run_loops", "--once", **env)
    lines = _error_lines(finished)
    assert finished.returncode == 1
    assert len(lines) == 2 and lines[0].startswith("configuration error: ") and named in lines[0], finished.stderr
    assert "Traceback" not in finished.stderr


def test_djangos_own_commands_say_it_in_two_lines_too(tmp_path):
    finished = _manage(tmp_path, "makemigrations", "--check", SECRET_KEY="")
    lines = _error_lines(finished)
    assert finished.returncode == 1 and "Traceback" not in finished.stderr, finished.stderr
    assert len(lines) == 2 and "set SECRET_KEY" in lines[0]


def test_the_fix_comes_with_the_error(tmp_path):
    secret_key = _error_lines(_manage(tmp_path, "check", SECRET_KEY=""))
    assert "make run" in secret_key[1] and str(tmp_path / "secret_key") in secret_key[1]
    database = _error_lines(_manage(tmp_path, "run_loops", "--once", DATABASE_URL=UNREACHABLE_DATABASE))
    assert database[1].startswith("Start PostgreSQL or correct DATABASE_URL")


@pytest.mark.parametrize("asks", [{"arguments": ["--traceback"]}, {"env": {"DEBUG": "true"}}], ids=["option", "debug"])
def test_traceback_or_debug_still_show_the_traceback(tmp_path, asks):
    finished = _manage(tmp_path, "run_loops", "--once", *asks.get("arguments", []),
                       DATABASE_URL=UNREACHABLE_DATABASE, **asks.get("env", {}))
    assert finished.returncode != 0 and "Traceback" in finished.stderr


def test_an_error_that_is_no_configuration_error_keeps_its_traceback(tmp_path):
    finished = _manage(tmp_path, "shell", "-c", "raise ValueError('a bug, not the configuration')")
    assert finished.returncode != 0 and "Traceback" in finished.stderr and "configuration error" not in finished.stderr


def test_a_password_in_a_rejected_redis_url_is_not_printed(tmp_path):
    finished = _manage(tmp_path, "check", REDIS_URL="http://user:hunter2@cache:6379/0")
    assert finished.returncode == 1 and "hunter2" not in finished.stderr and ":***@" in finished.stderr
