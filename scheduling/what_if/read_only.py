"""One consistent, read-only view of the database for a preview."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from psycopg import IsolationLevel


@contextmanager
def read_only_transaction() -> Iterator[None]:
    """Every read inside sees the same committed state (REPEATABLE READ), and PostgreSQL refuses any write
    (READ ONLY), so a preview cannot change anything even by mistake. Plain reads take no row lock: cycles, binds
    and agents carry on meanwhile. Inside a transaction a caller already holds, its reads stand as they are.

    The transaction begins with its first statement, as one `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`
    (psycopg's transaction characteristics, set for the block and restored after it): a preview that reads nothing
    costs no round trip, and one that reads saves a separate SET TRANSACTION."""
    if connection.in_atomic_block:
        yield
        return
    connection.ensure_connection()
    client = connection.connection
    kept = client.isolation_level, client.read_only
    client.isolation_level, client.read_only = IsolationLevel.REPEATABLE_READ, True
    try:
        with transaction.atomic():
            yield
    finally:
        if not client.closed:
            client.isolation_level, client.read_only = kept
