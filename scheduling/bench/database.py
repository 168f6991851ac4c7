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


@contextmanager
def statistics_kept(*, every_seconds: float = 10.0) -> Iterator[None]:
    """ANALYZE the current database now and, when the server's autovacuum is off, again every `every_seconds` while
    the block runs, as autovacuum does for a production database. Without statistics PostgreSQL plans the
    scheduler's reads of a few nodes' tasks as scans of every active task (a cost that grows with the run)."""
    _execute_autocommit("ANALYZE")
    with connections["default"].cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        autovacuum = cursor.fetchone()[0] == "on"
    if autovacuum:
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
