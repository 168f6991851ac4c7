"""Probes: `/healthz` (the process answers) and `/readyz` (it can do its work), JSON with a status per check.

Readiness needs the database, Redis, every migration applied, and whatever the apps register
(`readiness_check_register`): the scheduling app adds a scheduler that finished a cycle within three periods of its
tick. Both are open to anyone: probes carry no credentials, so the answers carry codes and figures only, never an
exception's text (a database error names hosts and users: it goes to the log). Once every migration was found
applied, the process does not build the migration graph again (its code cannot gain migrations).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import redis
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

logger = logging.getLogger(__name__)


def check_database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return {}


def check_redis() -> dict:
    with redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2) as client:
        client.ping()
    return {}


_migrations_applied = False


def check_migrations() -> dict:
    global _migrations_applied
    if _migrations_applied:
        return {}
    executor = MigrationExecutor(connection)
    unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if unapplied:
        raise ProbeFailure(f"{len(unapplied)} unapplied migration(s)", unapplied=len(unapplied))
    _migrations_applied = True
    return {}


class ProbeFailure(Exception):
    def __init__(self, message: str, **details):
        super().__init__(message)
        self.details = details


READINESS_CHECKS: dict[str, Callable[[], dict]] = {
    "database": check_database,
    "redis": check_redis,
    "migrations": check_migrations,
}


def readiness_check_register(name: str, check: Callable[[], dict]) -> None:
    """Add an app's check: it returns details to show, or raises (ProbeFailure with details, or any error)."""
    READINESS_CHECKS[name] = check


def _run(check: Callable[[], dict]) -> dict:
    started = time.perf_counter()
    try:
        result = {"status": "ok", **check()}
    except ProbeFailure as failure:
        result = {"status": "fail", "error": str(failure), **failure.details}
    except Exception as error:  # a probe reports whatever went wrong instead of failing itself
        logger.warning("readiness check %s failed", getattr(check, "__name__", check), exc_info=True)
        result = {"status": "fail", "error": type(error).__name__}
    result["duration_ms"] = round((time.perf_counter() - started) * 1000, 2)
    return result


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {name: _run(check) for name, check in READINESS_CHECKS.items()}
    ready = all(check["status"] == "ok" for check in checks.values())
    return JsonResponse({"status": "ok" if ready else "fail", "checks": checks}, status=200 if ready else 503)
