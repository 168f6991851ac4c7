"""One consistent, read-only view of the database for a preview."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


@contextmanager
def read_only_transaction() -> Iterator[None]:
    """Every read inside sees the same committed state (REPEATABLE READ), and PostgreSQL refuses any write
    (READ ONLY), so a preview cannot change anything even by mistake. Plain reads take no row lock: cycles, binds
    and agents carry on meanwhile. Inside a transaction a caller already holds, its reads stand as they are."""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield
