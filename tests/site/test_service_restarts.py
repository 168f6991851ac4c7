"""PostgreSQL and Redis really restarted under the running system (docs/operations.md): web (Daphne with its pool),
a scheduler instance, a Celery worker with beat and a fleet of simulated agents go on without a restart of their own.

The system runs on an embedded PostgreSQL cluster (a copy of the test database) and a Redis server of the test's own,
the only servers a test may stop.
"""

import re
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
import requests
from django.db import connection

from heteroflow_site.local_services import start_embedded_postgres, stop_embedded_postgres
from scheduling.bench.network import free_port
from scheduling.soak.processes import Supervisor, manage
from tenants.services import tenant_user_create
from tests.factories import make_node
from tests.processes import process_environment
from tests.scheduling.test_faults import _start_redis

pytestmark = [pytest.mark.embedded, pytest.mark.django_db(transaction=True)]

BACK_WITHIN_SECONDS = 10.0
TASK = {"name": "t", "type": "batch", "gpu_required": 1}
BOUND = {"scheduled", "running", "succeeded", "failed"}


def _copy_of_the_test_database(pgdata: Path) -> str:
    """The test database (its schema, migrations and this test's rows) in a new embedded cluster; its URL."""
    url = start_embedded_postgres(pgdata).rsplit("/", 1)[0] + "/heteroflow"
    binaries = Path(sys.modules["pgserver"].__file__).parent / "pginstall" / "bin"
    socket_dir = str(pgdata.resolve())
    subprocess.run([binaries / "createdb", "-h", socket_dir, "-U", "postgres", "heteroflow"], check=True)
    params = connection.get_connection_params()
    port = ["-p", str(params["port"])] if params.get("port") else []
    dump = subprocess.run([binaries / "pg_dump", "--no-owner", "-h", params["host"], *port, "-U", params["user"],
                           params["dbname"]], check=True, capture_output=True)
    restored = subprocess.run([binaries / "psql", "-q", "-v", "ON_ERROR_STOP=1", "-h", socket_dir, "-U", "postgres",
                               "heteroflow"], input=_plain(dump.stdout), capture_output=True)
    assert restored.returncode == 0, restored.stderr.decode()[-2000:]
    return url


def _plain(dump: bytes) -> bytes:
    """The dump without column options that only the source server knows (an extension's `pg_attver`)."""
    return re.sub(rb"^ALTER TABLE ONLY [^\n]* SET \(pg_attver=\d+\);\n", b"", dump, flags=re.MULTILINE)


def _until(condition, *, seconds: float, what: str, step: float = 0.2):
    deadline = time.monotonic() + seconds
    while True:
        try:
            value = condition()
        except (requests.RequestException, psycopg.Error):
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(step)


def test_after_postgresql_and_redis_restart_the_running_system_is_back_within_10_s(tmp_path, tenant):
    for _ in range(2):
        make_node(cards=4)
    _, token = tenant_user_create(tenant=tenant, username="restart-user", password="orchid-lantern-42")
    pgdata = tmp_path / "pg"
    database_url = _copy_of_the_test_database(pgdata)
    redis_port = free_port()
    redis_server = _start_redis(redis_port)
    web_port = free_port()
    base, headers = f"http://127.0.0.1:{web_port}", {"Authorization": f"Token {token}"}
    env = process_environment(DATABASE_URL=database_url, REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
                              HETEROFLOW_HEARTBEAT_TIMEOUT="30")
    supervisor = Supervisor(tmp_path / "logs")

    def database(sql: str, params=()) -> list[tuple]:
        with psycopg.connect(host=str(pgdata.resolve()), user="postgres", dbname="heteroflow", connect_timeout=2) as db:
            return db.execute(sql, params).fetchall()

    def submit() -> int:
        answer = requests.post(f"{base}/api/v1/tasks", json=TASK, headers=headers, timeout=15)
        assert answer.status_code == 201, answer.text
        return answer.json()["id"]

    def bound(task_ids: list[int]) -> bool:
        return all(requests.get(f"{base}/api/v1/tasks/{task_id}", headers=headers, timeout=15).json()["status"]
                   in BOUND for task_id in task_ids)

    try:
        supervisor.add("web", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(web_port),
                               "heteroflow_site.asgi:application"], {**env, "DATABASE_POOL": "true"})
        supervisor.add("scheduler", manage("run_scheduler", "--interval", "2"), env)
        supervisor.add("worker", [sys.executable, "-m", "celery", "-A", "heteroflow_site", "worker", "--beat",
                                  "--concurrency", "1", "--loglevel", "WARNING",
                                  "--schedule", str(tmp_path / "beat-schedule")], env)
        supervisor.add("fleet", manage("simulate_fleet", "--server", base, "--interval", "1",
                                       "--state-dir", str(tmp_path / "fleet")), env)
        _until(lambda: requests.get(f"{base}/healthz", timeout=5).ok, seconds=60, what="the web server", step=0.5)
        before = [submit() for _ in range(2)]
        _until(lambda: database("SELECT count(*) FROM nodes_node WHERE status = 'online' AND "
                                "last_heartbeat_at > now() - interval '3 seconds'")[0][0] == 2,
               seconds=60, what="the fleet reports", step=0.5)
        _until(lambda: bound(before), seconds=30, what="tasks bound before the restart")

        stop_embedded_postgres(pgdata)
        redis_server.terminate()
        redis_server.wait(timeout=10)
        redis_server = _start_redis(redis_port)
        start_embedded_postgres(pgdata)
        restarted, restarted_at = time.monotonic(), database("SELECT now()")[0][0]

        answers = [requests.get(f"{base}/api/v1/tasks", headers=headers, timeout=15).status_code for _ in range(30)]
        after = [submit() for _ in range(2)]
        _until(lambda: bound(after), seconds=BACK_WITHIN_SECONDS, what="tasks submitted after the restart bound")
        _until(lambda: database("SELECT count(*) FROM scheduling_cyclerecord WHERE started_at > %s",
                                [restarted_at])[0][0], seconds=BACK_WITHIN_SECONDS, what="a cycle")
        _until(lambda: database("SELECT bool_and(status = 'online' AND last_heartbeat_at > %s) FROM nodes_node",
                                [restarted_at])[0][0], seconds=BACK_WITHIN_SECONDS, what="every agent's heartbeat")
        _until(lambda: database("SELECT count(*) FROM nodes_livenessclock WHERE last_reachable_at > %s",
                                [restarted_at])[0][0], seconds=BACK_WITHIN_SECONDS, what="the worker's liveness job")
        back_after = time.monotonic() - restarted
        audit = subprocess.run(manage("audit_ledgers"), env=env, capture_output=True, text=True, timeout=120)
        alive = {name: managed.alive for name, managed in supervisor.processes.items()}
    finally:
        supervisor.stop_all()
        redis_server.terminate()
        redis_server.wait(timeout=10)
        stop_embedded_postgres(pgdata)

    logs = {path.name: path.read_text()[-2000:] for path in (tmp_path / "logs").glob("*.log")}
    assert answers == [200] * 30, logs["web.log"]
    assert back_after < BACK_WITHIN_SECONDS, back_after
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert alive == {"web": True, "scheduler": True, "worker": True, "fleet": True}, "no process was restarted"
