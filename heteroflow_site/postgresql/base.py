"""Django's PostgreSQL backend, whose pool never hands a dead connection to a request (docs/operations.md).

psycopg_pool can check connections itself (Django passes it `ConnectionPool.check_connection` under
CONN_HEALTH_CHECKS), but it waits a backoff after each failed check — 1 s, 2 s, 4 s… — before it tries the next
connection. After a PostgreSQL restart every pooled connection is dead, so a request would run out of its pool
timeout after four of them, and sixteen dead connections would fail four requests. Here the connection the pool
gives is checked the same way; a dead one means its neighbours died with it, so the whole pool is checked at once
and the request takes a live (or new) connection without waiting.
"""

import psycopg
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        if self.pool is None:
            return connection
        try:
            ConnectionPool.check_connection(connection)
        except psycopg.Error:
            self.pool.putconn(connection)  # broken: the pool discards it and opens another
            self.pool.check()
            connection = super().get_new_connection(conn_params)
        return connection
