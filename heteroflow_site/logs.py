"""Logging: one line per request, request context on every record, human lines or JSON (`LOG_FORMAT=json`).

Every record carries `request_id`, `user`, `tenant`, `task_id` and `cycle_id` when they are known: the request
middleware sets the first ones for the whole request, code that knows a task or a cycle passes
`extra={"task_id": ...}` / `extra={"cycle_id": ...}`.
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
import uuid

from pythonjsonlogger.json import JsonFormatter

from heteroflow_site.middleware import Middleware

CONTEXT_FIELDS = ("request_id", "user", "tenant", "task_id", "cycle_id")
# Node agents poll these routes every few seconds each (design §14), probes poll the last two: at info level they would
# drown everything else.
POLLING_ROUTES = frozenset({"api-agent-heartbeat", "api-agent-work", "healthz", "readyz"})
# A caller's own request id is kept when it looks like one (proxies set it), so one id follows a request across hops.
REQUEST_ID_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

_context: contextvars.ContextVar[dict[str, object]] = contextvars.ContextVar("heteroflow_log_context", default={})
request_logger = logging.getLogger("heteroflow.request")


class ContextFilter(logging.Filter):
    """Adds the known context fields to each record (missing ones as None), without overriding explicit extras."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _context.get()
        for field in CONTEXT_FIELDS:
            if getattr(record, field, None) is None:
                setattr(record, field, context.get(field))
        return True


class HumanFormatter(logging.Formatter):
    """`time level logger message [request_id user@tenant task=… cycle=…]`; the bracket only with what is known."""

    def __init__(self):
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        who = "@".join(str(part) for part in (getattr(record, "user", None), getattr(record, "tenant", None)) if part)
        known = [getattr(record, "request_id", None), who or None]
        known += [f"{label}={value}" for label, value in (("task", getattr(record, "task_id", None)),
                                                          ("cycle", getattr(record, "cycle_id", None))) if value]
        known = [str(part) for part in known if part]
        return f"{line} [{' '.join(known)}]" if known else line


class JsonLineFormatter(JsonFormatter):
    def __init__(self):
        # `time` in ISO 8601 with the zone, which log pipelines parse without a pattern.
        super().__init__("%(levelname)s %(name)s %(message)s", timestamp="time",
                         rename_fields={"levelname": "level", "name": "logger"})


def set_context(**fields: object) -> contextvars.Token:
    return _context.set({**_context.get(), **fields})


def reset_context(token: contextvars.Token) -> None:
    _context.reset(token)


class RequestLogMiddleware(Middleware):
    """One line per request after the response: method, path, status, duration, who. Agent polling at debug."""

    def handle(self, request):
        token, request_id, started = self._start(request)
        try:
            response = self.get_response(request)
            response["X-Request-ID"] = request_id
            self._log(request, response.status_code, started)
            return response
        except Exception:
            self._log(request, 500, started)
            raise
        finally:
            reset_context(token)

    def _start(self, request) -> tuple[contextvars.Token, str, float]:
        offered = request.headers.get("X-Request-ID", "")
        request_id = offered if REQUEST_ID_PATTERN.match(offered) else uuid.uuid4().hex[:16]
        return set_context(request_id=request_id), request_id, time.perf_counter()

    def process_view(self, request, view_func, view_args, view_kwargs):
        # The tenant and task are known once the URL is resolved; DRF authenticates inside the view, so the user of
        # a token request is only read after it.
        if "task_id" in view_kwargs:
            set_context(task_id=view_kwargs["task_id"])

    def _log(self, request, status: int, started: float) -> None:
        route = request.resolver_match.url_name if request.resolver_match else None
        level = logging.DEBUG if route in POLLING_ROUTES else logging.INFO
        if not request_logger.isEnabledFor(level):
            return
        user = getattr(request, "user", None)
        username, tenant = None, None
        if user is not None and user.is_authenticated:
            username = user.get_username()
            membership = getattr(user, "membership", None)
            tenant = membership.tenant.name if membership is not None else None
        elapsed_ms = (time.perf_counter() - started) * 1000
        request_logger.log(level, "%s %s %s %.1fms", request.method, request.get_full_path(), status, elapsed_ms,
                           extra={"user": username, "tenant": tenant, "status": status, "method": request.method,
                                  "path": request.path, "duration_ms": round(elapsed_ms, 1)})
