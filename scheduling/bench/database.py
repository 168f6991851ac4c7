"""A throwaway database for a benchmark (`hf_bench_<pid>`) or a soak run (`hf_soak_<pid>`) on the default database's
server, dropped afterwards."""

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.core.management import call_command
from django.db import connections


@contextmanager
def throwaway_database(*, keep: bool = False, prefix: str = "hf_bench") -> Iterator[str]:
    """Create and migrate a fresh database, make it Django's default for the block, yield its name; dropped on
    exit unless `keep` (for profiling)."""
    original = settings.DATABASES["default"]["NAME"]
    name = f"{prefix}_{os.getpid()}"
    _execute_autocommit(f'CREATE DATABASE "{name}"')
    try:
        _use_database(name)
        call_command("migrate", verbosity=0, interactive=False)
        yield name
    finally:
        connections.close_all()
        _use_database(original)
        if not keep:
            _execute_autocommit(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_url(name: str) -> str:
    """DATABASE_URL with the database `name`: what a benchmark passes to the processes it starts."""
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path=f"/{name}"))


def _execute_autocommit(sql: str) -> None:
    """Without the connection's statement timeout: creating or dropping a database waits for a checkpoint, which on
    a busy server outlasts a timeout meant for requests (a benchmark then failed in its very last step)."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")
        try:
            cursor.execute(sql)
        finally:
            cursor.execute("RESET statement_timeout")


def _use_database(name: str) -> None:
    connections["default"].close()
    settings.DATABASES["default"]["NAME"] = name
    connections["default"].settings_dict["NAME"] = name


# The planner statistics a benchmark runs under (`bench_scheduler --stats`): none at all, those taken once right
# after seeding (every task pending, none active: the state in which a plan was seen to flip) or kept fresh while
# it runs, as autovacuum keeps a production database's.
STATISTICS_STATES = ("none", "seeded", "fresh")


@contextmanager
def statistics_kept(state: str = "fresh", *, every_seconds: float = 10.0) -> Iterator[None]:
    """Run the block under the planner statistics `state` of the current database. Autovacuum is turned off for
    its tables whatever the server's setting, so no state changes by itself in the middle of a run: `seeded` is an
    ANALYZE now, `fresh` one now and another every `every_seconds` while the block runs."""
    if state not in STATISTICS_STATES:
        raise ValueError(f"statistics state {state!r}: expected one of {', '.join(STATISTICS_STATES)}")
    _without_autovacuum()
    if state != "none":
        _execute_autocommit("ANALYZE")
    if state != "fresh":
        yield
        return
    stop = threading.Event()

    def keep() -> None:
        try:
            while not stop.wait(every_seconds):
                _execute_autocommit("ANALYZE")
        finally:
            connections["default"].close()

    keeper = threading.Thread(target=keep, name="bench-analyze", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join()


def _without_autovacuum() -> None:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname = 'public'")
        tables = [name for (name,) in cursor.fetchall()]
        for table in tables:
            cursor.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)")


def explain_slow_statements(name: str, *, over_ms: int) -> None:
    """Sessions opened on database `name` from now on log the plan of every statement slower than `over_ms`, with
    its actual rows and buffers, to the server's log (PostgreSQL's auto_explain; needs a superuser)."""
    settings_sql = {
        "session_preload_libraries": "auto_explain", "auto_explain.log_min_duration": f"{over_ms}",
        "auto_explain.log_analyze": "on", "auto_explain.log_buffers": "on", "auto_explain.log_nested_statements": "on",
    }
    for setting, value in settings_sql.items():
        _execute_autocommit(f'ALTER DATABASE "{name}" SET {setting} = \'{value}\'')
