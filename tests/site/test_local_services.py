"""The embedded servers' life cycle with real processes: whoever starts them stops them, and a crash's leftovers
never block the next start."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import psycopg
import pytest
import redis

from heteroflow_site import local_services

REPOSITORY = Path(__file__).resolve().parents[2]
# Reports the servers' URLs and pids, then waits to be interrupted, like `make run`'s honcho.
REPORTING_CHILD = """
import os, sys, time
from pathlib import Path
data = Path(os.environ["HETEROFLOW_DATA_DIR"])
pid = (data / "pg" / "postmaster.pid").read_text().split()[0]
Path(sys.argv[1]).write_text("\\n".join([os.environ["DATABASE_URL"], os.environ["REDIS_URL"], pid,
                                        (data / "redis.pid").read_text().strip()]))
time.sleep(120)
"""


def _environment(data_dir: Path) -> dict[str, str]:
    # Empty values win over the worktree's .env, which would otherwise name real servers.
    return {**os.environ, "HETEROFLOW_DATA_DIR": str(data_dir), "DATABASE_URL": "", "REDIS_URL": ""}


def _wait_for(path: Path, *, run: subprocess.Popen, seconds: float = 180) -> None:
    """Until `path` is written; a run that ended first, or the deadline, fails the test with what the run said."""
    deadline = time.monotonic() + seconds
    while not (path.exists() and path.read_text()):
        if run.poll() is not None or time.monotonic() > deadline:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
            pytest.fail(f"{path} never written; the run exited {run.wait(30)}: {run.stderr.read()[-3000:]}")
        time.sleep(0.1)


@pytest.mark.embedded
def test_ctrl_c_on_a_run_stops_the_servers_it_started_and_the_next_run_starts_them_again(tmp_path):
    data_dir, report = tmp_path / "data", tmp_path / "report"
    run = subprocess.Popen(
        [sys.executable, "-m", "heteroflow_site.local_services", "run", "--", sys.executable, "-c",
         REPORTING_CHILD, str(report)],
        cwd=REPOSITORY, env=_environment(data_dir), start_new_session=True, stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait_for(report, run=run)
        database_url, redis_url, postmaster, redis_server = report.read_text().split("\n")
        assert redis.Redis.from_url(redis_url).ping()

        os.killpg(run.pid, signal.SIGINT)  # what the terminal sends the whole foreground group on Ctrl-C
        assert run.wait(180) == 0, "Ctrl-C is how a run ends, not a failure"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert "stopped" in run.stderr.read()
    assert not psutil.pid_exists(int(postmaster)) and not psutil.pid_exists(int(redis_server))
    assert not (data_dir / "pg" / "postmaster.pid").exists() and not (data_dir / "redis.sock").exists()

    again = subprocess.run(
        [sys.executable, "-m", "heteroflow_site.local_services", "run", "--", sys.executable, "-c",
         "import os, psycopg, redis; from urllib.parse import unquote, urlparse;"
         "url = urlparse(os.environ['DATABASE_URL']);"
         "psycopg.connect(host=unquote(url.hostname), user='postgres', dbname='postgres').close();"
         "assert redis.Redis.from_url(os.environ['REDIS_URL']).ping()"],
        cwd=REPOSITORY, env=_environment(data_dir), capture_output=True, text=True, timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert local_services.stop_local_services(data_dir) == [], "the second run stopped what it started"


@pytest.mark.embedded
def test_a_leftover_lock_naming_a_live_unrelated_process_does_not_block_the_start(tmp_path):
    local_services.start_embedded_postgres(tmp_path / "pg")
    lock_file = tmp_path / "pg" / "postmaster.pid"
    lines = lock_file.read_text().split("\n")
    assert local_services.stop_local_services(tmp_path, only=["postgresql"]) == ["postgresql"]
    # After a crash and a reboot the recorded pid often belongs to another program: this test's own process here.
    lock_file.write_text("\n".join([str(os.getpid()), *lines[1:]]))

    url = local_services.start_embedded_postgres(tmp_path / "pg")
    try:
        with psycopg.connect(host=str((tmp_path / "pg").resolve()), user="postgres", dbname="postgres") as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert url.startswith("postgres://postgres@")
    finally:
        local_services.stop_local_services(tmp_path)
    assert not lock_file.exists()


@pytest.mark.embedded
def test_stop_ends_servers_left_by_a_bare_start_and_says_so(tmp_path):
    environment = _environment(tmp_path)
    started = subprocess.run([sys.executable, "-c", "from heteroflow_site import local_services as s;"
                              "print(s.ensure_local_services(s.default_data_dir()))"],
                             cwd=REPOSITORY, env=environment, capture_output=True, text=True, timeout=120)
    try:
        assert started.stdout.strip() == "['postgresql', 'redis']", started.stderr
    finally:
        stop = subprocess.run([sys.executable, "-m", "heteroflow_site.local_services", "stop"], cwd=REPOSITORY,
                              env=environment, capture_output=True, text=True, timeout=120)
    assert stop.stdout.strip() == "stopped: postgresql, redis"
    assert not local_services.postgres_running(tmp_path / "pg")
