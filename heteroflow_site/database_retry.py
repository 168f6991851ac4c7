"""A request whose database connection turns out dead at its first statement is run once more on a fresh one.

Each connection is checked before a request gets it (the pool's: heteroflow_site.postgresql; a kept one:
Django's CONN_HEALTH_CHECKS), so a PostgreSQL restart or a terminated backend costs no request in the usual case.
A connection can still die between that check and the request's first statement; nothing was written then, so the
request is run again, once, on a new connection instead of answering 500. An error at any later statement is the request's own: what the statements
before it did may have been committed.

Every connection of a web process carries `_watch_statements`; it reports to the request that runs on it through a
context variable (the middleware and the view run in one thread, heteroflow_site.asgi_http).
"""

import contextvars
import logging
from dataclasses import dataclass

from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError, close_old_connections
from django.db.backends.signals import connection_created

from heteroflow_site.middleware import Middleware

logger = logging.getLogger(__name__)


@dataclass
class _Statements:
    """What the statements of one run of a request did."""

    may_retry: bool
    started: int = 0
    lost_at_first: bool = False

    @property
    def retry(self) -> bool:
        return self.may_retry and self.lost_at_first


_current: contextvars.ContextVar[_Statements | None] = contextvars.ContextVar("request_statements", default=None)


def _watch_statements(execute, sql, params, many, context):
    statements = _current.get()
    if statements is None:
        return execute(sql, params, many, context)
    statements.started += 1
    try:
        return execute(sql, params, many, context)
    except (OperationalError, InterfaceError):
        if statements.started == 1 and _connection_lost(context["connection"]):
            statements.lost_at_first = True
        raise


def _connection_lost(wrapper) -> bool:
    # psycopg marks a connection whose server end went away as closed; a statement timeout or a lock timeout (also
    # OperationalError) leaves it open, and those are the request's own answer.
    return wrapper.connection is None or wrapper.connection.closed


def _watch_new_connection(sender, connection, **kwargs) -> None:
    # First in the list: a wrapper someone pushes for a block (`with connection.execute_wrapper(...)`) pops its own.
    if _watch_statements not in connection.execute_wrappers:
        connection.execute_wrappers.insert(0, _watch_statements)


class DatabaseRetryMiddleware(Middleware):
    """Runs the rest of the stack again, once, when the first run's first statement met a lost connection."""

    def __init__(self, get_response):
        super().__init__(get_response)
        connection_created.connect(_watch_new_connection, dispatch_uid="heteroflow-watch-statements")

    def handle(self, request):
        response, statements = self._run(request, may_retry=_keep_body(request))
        if statements.retry:
            self._note(request)
            close_old_connections()
            response, _ = self._run(request, may_retry=False)
        return response

    def _run(self, request, *, may_retry: bool):
        statements = _Statements(may_retry=may_retry)
        token = _current.set(statements)
        try:
            return self.get_response(request), statements
        finally:
            _current.reset(token)

    def _note(self, request) -> None:
        logger.warning("%s %s: the database connection was lost before its first statement; running the request "
                       "again on a new connection", request.method, request.path)


def _keep_body(request) -> bool:
    """Read the body into memory, so that a second run reads it again; False when it is too large to keep."""
    try:
        request.body  # noqa: B018
    except RequestDataTooBig:
        return False
    return True
