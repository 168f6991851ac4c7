"""Under ASGI the middleware stack and the view run in one thread per request (heteroflow_site.asgi_http): the
project's own middleware (the request log, the static files) answer as under WSGI."""

import asyncio
import re
import subprocess
import sys

import pytest
import requests

from tenants.services import tenant_user_create
from tests.processes import daphne_serving, process_environment


@pytest.mark.django_db(transaction=True)
def test_static_files_request_ids_and_the_request_log_work_under_daphne(tmp_path, tenant):
    _, token = tenant_user_create(tenant=tenant, username="asgi-user", password="orchid-lantern-42")
    log = tmp_path / "server.log"
    with daphne_serving(log=log, DATABASE_POOL="true") as base:
        stylesheet = requests.get(f"{base}/static/css/app.css", timeout=10)
        tasks = requests.get(f"{base}/api/v1/tasks", headers={"Authorization": f"Token {token}",
                                                            "X-Request-ID": "asgi-check-0001"}, timeout=10)
        missing = requests.get(f"{base}/static/no-such-file.css", timeout=10)

    assert stylesheet.status_code == 200 and "text/css" in stylesheet.headers["Content-Type"]
    assert tasks.status_code == 200 and tasks.headers["X-Request-ID"] == "asgi-check-0001"
    assert missing.status_code == 404
    lines = log.read_text()
    assert re.search(r"GET /api/v1/tasks 200 [\d.]+ms \[asgi-check-0001 asgi-user@" + re.escape(tenant.name),
                     lines), lines


def test_the_asgi_application_leaves_its_startup_objects_out_of_garbage_collection():
    loaded = subprocess.run(
        [sys.executable, "-c", "import gc, heteroflow_site.asgi, sys; "
                               "print(gc.get_freeze_count(), 'scheduling.api.task_apis' in sys.modules, "
                               "gc.get_threshold()[0])"],
        env=process_environment(), capture_output=True, text=True, timeout=120)
    frozen, views_imported, young_threshold = loaded.stdout.split()
    assert int(frozen) > 10_000 and views_imported == "True", loaded.stderr[-2000:]
    # Young collections far apart: a request's own objects are freed by their reference counts before one runs.
    assert int(young_threshold) >= 10_000


@pytest.mark.django_db(transaction=True)
def test_an_asgi_request_crosses_to_a_thread_for_the_whole_stack_not_at_each_middleware(monkeypatch):
    from asgiref.sync import SyncToAsync
    from django.core.handlers.asgi import ASGIHandler

    from heteroflow_site.asgi_http import OneThreadASGIHandler

    def crossings(handler) -> tuple[int, int]:
        counted = []
        original = SyncToAsync.__call__

        async def counting(self, *args, **kwargs):
            counted.append(self.func)
            return await original(self, *args, **kwargs)

        monkeypatch.setattr(SyncToAsync, "__call__", counting)
        try:
            status = asyncio.run(_get(handler, "/api/v1/tasks"))
        finally:
            monkeypatch.setattr(SyncToAsync, "__call__", original)
        return status, len(counted)

    # The request's start (its signal's receivers), the stack with the view, the response's close.
    assert crossings(OneThreadASGIHandler()) == (401, 3)
    # Django's own handler with the same stack crosses for every run of synchronous middleware and its hooks.
    status, django_crossings = crossings(ASGIHandler())
    assert status == 401 and django_crossings > 3


@pytest.mark.django_db(transaction=True)
def test_requests_one_after_another_run_on_the_same_kept_thread(monkeypatch):
    import threading

    from heteroflow_site.asgi_http import OneThreadASGIHandler

    handler, threads = OneThreadASGIHandler(), []
    answer = handler.get_response

    def noting_the_thread(request):
        threads.append(threading.get_ident())
        return answer(request)

    monkeypatch.setattr(handler, "get_response", noting_the_thread)

    async def three_requests():
        return [await _get(handler, "/api/v1/tasks") for _ in range(3)]

    assert asyncio.run(three_requests()) == [401] * 3
    # Django's own handler starts a thread for each request (and another to join it).
    assert len(threads) == 3 and len(set(threads)) == 1


async def _get(handler, path: str) -> int:
    sent, received = [], []

    async def receive():
        if received:  # the handler listens for a disconnect while the request runs: none comes
            await asyncio.Event().wait()
        received.append(True)
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}
    await asyncio.wait_for(handler(scope, receive, send), timeout=30)
    return next(message["status"] for message in sent if message["type"] == "http.response.start")
