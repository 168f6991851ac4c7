"""Under ASGI the middleware stack runs in the event loop: the project's own middleware (the request log, the
static files) answer as under WSGI."""

import logging
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
    assert re.search(r"GET /api/v1/tasks 200 [\d.]+ms \[asgi-check-0001 asgi-user@" + re.escape(tenant.name), lines), lines


def test_the_asgi_application_leaves_its_startup_objects_out_of_garbage_collection():
    loaded = subprocess.run(
        [sys.executable, "-c", "import gc, heteroflow_site.asgi, sys; "
                               "print(gc.get_freeze_count(), 'scheduling.api.task_apis' in sys.modules)"],
        env=process_environment(), capture_output=True, text=True, timeout=120)
    frozen, views_imported = loaded.stdout.split()
    assert int(frozen) > 10_000 and views_imported == "True", loaded.stderr[-2000:]


def test_no_middleware_makes_an_asgi_request_hop_between_the_event_loop_and_threads(caplog, settings):
    from django.core.handlers.asgi import ASGIHandler

    settings.DEBUG = True  # Django says which middleware it adapts only then
    with caplog.at_level(logging.DEBUG, logger="django.request"):
        ASGIHandler()

    assert not [record.getMessage() for record in caplog.records if "adapted for middleware" in record.getMessage()]
