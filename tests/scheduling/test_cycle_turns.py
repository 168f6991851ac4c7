"""Scheduler instances take turns: one cycle at a time, the others hot standbys (scheduling.cycle.turns)."""

import os
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from scheduling import lifecycle
from scheduling.cycle import run as cycle
from scheduling.cycle.run import run_cycle
from scheduling.cycle.turns import CYCLE_LOCK_KEY
from tests.factories import make_node, make_task

# An instance in the middle of its cycle: it holds the turn until it is killed.
HOLDER = """
import time, django
django.setup()
from scheduling.cycle.turns import cycle_turn
with cycle_turn(wait=0) as turn:
    print(turn, flush=True)
    time.sleep(300)
"""


def _database_url() -> str:
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path=f"/{connection.settings_dict['NAME']}"))


@pytest.fixture
def pending_task(tenant):
    make_node(cards=2)
    return make_task(tenant=tenant, gpu_required=1)


def test_a_cycle_waits_while_another_instance_has_its_turn_then_skips(pending_task, monkeypatch):
    monkeypatch.setattr(cycle, "TURN_WAIT_SECONDS", 0.2)
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [CYCLE_LOCK_KEY])
        result = run_cycle()
    assert result.skipped
    pending_task.refresh_from_db()
    assert pending_task.status == lifecycle.PENDING
    assert run_cycle().bound == 1


def test_when_the_instance_holding_the_turn_is_killed_the_next_cycle_elsewhere_runs(pending_task, monkeypatch):
    monkeypatch.setattr(cycle, "TURN_WAIT_SECONDS", 0.2)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], cwd=settings.BASE_DIR, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "DATABASE_URL": _database_url(), "DJANGO_SETTINGS_MODULE": "heteroflow_site.settings",
             "PYTHONPATH": str(settings.BASE_DIR)},
    )
    try:
        assert holder.stdout.readline().strip() == "True"
        assert run_cycle().skipped
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    # The killed instance's connection closes and PostgreSQL releases its turn: the standby's next cycle runs.
    monkeypatch.setattr(cycle, "TURN_WAIT_SECONDS", 30)
    result = run_cycle()
    assert not result.skipped
    assert result.bound == 1


def test_concurrent_cycles_may_be_switched_back_on(pending_task, monkeypatch):
    monkeypatch.setitem(settings.SCHEDULER, "concurrent_cycles", True)
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [CYCLE_LOCK_KEY])
        assert run_cycle().bound == 1


def test_a_released_turn_goes_to_the_instance_waiting_for_it_not_back_to_the_releaser(db):
    import threading

    from django.db import connections

    from scheduling.cycle.turns import cycle_turn

    outcome, waiting_started = {}, threading.Event()

    def standby():
        try:
            waiting_started.set()
            with cycle_turn(wait=10) as turn:
                outcome["turn"] = turn
                outcome["holding"] = True
                released.wait(10)
        finally:
            connections.close_all()

    released = threading.Event()
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", [CYCLE_LOCK_KEY])
        thread = threading.Thread(target=standby)
        thread.start()
        waiting_started.wait(5)
        _wait_until_waiting(holder)
        holder.execute("SELECT pg_advisory_unlock(%s)", [CYCLE_LOCK_KEY])
        # The releaser asks again at once, as an instance whose cycle just ended does.
        took_it_back = holder.execute("SELECT pg_try_advisory_lock(%s)", [CYCLE_LOCK_KEY]).fetchone()[0]
        released.set()
        thread.join(15)
    assert outcome.get("turn") is True
    assert not took_it_back


def _wait_until_waiting(holder, seconds: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        waiting = holder.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                                 " AND objid = %s AND database = (SELECT oid FROM pg_database"
                                 " WHERE datname = current_database())", [CYCLE_LOCK_KEY & 0xFFFFFFFF]).fetchone()[0]
        if waiting:
            return
        time.sleep(0.01)
    raise AssertionError("the standby never queued for the turn")


@pytest.mark.django_db(transaction=True)
def test_an_instance_whose_session_ended_runs_nothing_more_in_its_turn_while_the_standby_has_it():
    import threading

    from django.db import DatabaseError, connections, transaction

    from scheduling.cycle.turns import TurnLost, cycle_turn
    from tenants.models import Tenant

    standby_turn, release = threading.Event(), threading.Event()

    def standby():
        try:
            with cycle_turn(wait=20) as turn:
                if turn:
                    standby_turn.set()
                    release.wait(20)
        finally:
            connections.close_all()

    thread = threading.Thread(target=standby)
    with pytest.raises(TurnLost):
        with cycle_turn(wait=1) as turn:
            assert turn
            pid = connection.connection.info.backend_pid
            thread.start()
            with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
                _wait_until_waiting(other)
                other.execute("SELECT pg_terminate_backend(%s)", [pid])
            assert standby_turn.wait(10), "PostgreSQL gave the dead session's turn to the standby"
            # The cycle meets the dead session in a transaction; its failed rollback makes Django drop the
            # connection, and the next statement would silently open a new session that holds no turn.
            with pytest.raises(DatabaseError):
                with transaction.atomic():
                    Tenant.objects.count()
            Tenant.objects.count()
    release.set()
    thread.join(30)

    # The next cycle queues for the turn again on a new session.
    with cycle_turn(wait=5) as turn:
        holders = _turn_holders()
        assert turn and holders == [connection.connection.info.backend_pid]


def _turn_holders() -> list[int]:
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        # Advisory locks are per database: other databases of the server (other test runs) have turns of their own.
        return [pid for (pid,) in other.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = %s AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())", [CYCLE_LOCK_KEY & 0xFFFFFFFF])]


@pytest.mark.django_db(transaction=True)
def test_two_scheduler_processes_go_on_taking_turns_after_every_backend_is_terminated(tenant, tmp_path):
    from scheduling.models import Task
    from tests.factories import ledger_mismatches
    from tests.processes import PROJECT, process_environment

    for _ in range(2):
        make_node(cards=8)
    logs = [tmp_path / f"scheduler-{index}.log" for index in range(2)]
    schedulers = [subprocess.Popen([sys.executable, str(PROJECT / "manage.py"), "run_scheduler", "--interval", "0.5",
                                    "--instance", f"s{index}"], env=process_environment(), cwd=PROJECT,
                                   stdout=log.open("wb"), stderr=subprocess.STDOUT)
                  for index, log in enumerate(logs)]
    try:
        for round_ in range(3):
            tasks = [make_task(tenant=tenant, gpu_required=1).id for _ in range(4)]
            if round_:
                # While the instances run cycles, or wait for their turn: their sessions end under them.
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                   "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            deadline = time.monotonic() + 30
            while Task.objects.filter(id__in=tasks, status=lifecycle.SCHEDULED).count() < len(tasks):
                assert time.monotonic() < deadline, [log.read_text()[-2000:] for log in logs]
                time.sleep(0.1)
        alive = [scheduler.poll() is None for scheduler in schedulers]
    finally:
        for scheduler in schedulers:
            scheduler.terminate()
            scheduler.wait(timeout=30)

    assert alive == [True, True], "no instance needed a restart"
    assert Task.objects.filter(status=lifecycle.SCHEDULED).count() == 12
    assert ledger_mismatches() == []
