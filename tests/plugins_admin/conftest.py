import functools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import import_module

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.test import Client

from heteroflow_site.celery import app as celery_app


@pytest.fixture(autouse=True)
def _eager_celery():
    """Notification deliveries run inline, as CELERY_TASK_ALWAYS_EAGER does in a test settings module."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


class WebhookReceiver:
    """A real HTTP server on 127.0.0.1 that records every POST body and answers with `status`."""

    def __init__(self):
        self.requests: list[dict] = []
        self.status = 204
        self.received = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append({
                    "path": self.path,
                    "content_type": self.headers.get("Content-Type"),
                    "json": json.loads(body or b"null"),
                })
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                receiver.received.set()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook_receiver():
    receiver = WebhookReceiver()
    yield receiver
    receiver.close()


@pytest.fixture
def staff_page_client(admin_user):
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.fixture
def tenant_page_client(tenant_client):
    client = Client()
    client.force_login(tenant_client.user)
    return client


# The data migrations that store the default plugin rows, and the function each runs.
DEFAULT_ROWS_MIGRATIONS = ((("plugins_admin", "0002_default_plugin_set"), "create_defaults"),
                           (("plugins_admin", "0003_fgd_plugin"), "create_fgd_row"),
                           (("plugins_admin", "0005_fgd_default_settings"), "store_fgd_defaults"),
                           (("plugins_admin", "0006_fgd_gap_settings"), "store_gap_defaults"))


@functools.cache
def _models_at(migration: tuple[str, str]):
    """The models as that migration saw them (PluginConfig lived in plugins_admin then; the table is the same)."""
    return MigrationLoader(connection).project_state(migration).apps


@pytest.fixture
def create_default_rows():
    """The data migrations' own functions (transactional tests elsewhere flush the rows they created)."""
    def create() -> None:
        for (app, name), function in DEFAULT_ROWS_MIGRATIONS:
            getattr(import_module(f"{app}.migrations.{name}"), function)(_models_at((app, name)), None)

    return create


@pytest.fixture(autouse=True)
def _default_rows(request, create_default_rows):
    """Every database test starts from the default plugin set the migration stores."""
    if request.node.get_closest_marker("django_db"):
        create_default_rows()
