import os

import pytest
from django.contrib.auth import get_user_model
from knox.models import AuthToken
from rest_framework.test import APIClient

from scheduling.queue import immediate_queue
from tenants.models import Tenant
from tenants.services import tenant_user_create

pytest_plugins = ["tests.web_clients"]


@pytest.fixture(scope="session", autouse=True)
def _immediate_queue_of_this_worker():
    """Test workers share one Redis: each gets a queue and published queue positions of its own, or one worker's
    cycle or emptying races another's test (their task ids overlap, each worker having a database of its own)."""
    from scheduling.queue import positions

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    queue_key, positions_key = immediate_queue.QUEUE_KEY, positions.POSITIONS_KEY
    immediate_queue.QUEUE_KEY = f"{queue_key}:{worker}"
    positions.POSITIONS_KEY = f"{positions_key}:{worker}"
    yield
    immediate_queue.QUEUE_KEY, positions.POSITIONS_KEY = queue_key, positions_key


def pytest_configure(config):
    """Users are made by the hundred here; a deliberately slow password hash would only slow the suite down."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _empty_cache():
    """Throttle counters and per-cycle figures live in the process cache, the preemption plans' snapshot and the
    submit warnings' node sizes in the process; each test starts without them (a flush between tests logs no
    node change)."""
    from django.core.cache import cache

    from scheduling.diagnostics.node_sizes import node_sizes
    from scheduling.what_if import preemption_plan

    cache.clear()
    preemption_plan._generation = None
    preemption_plan._snapshots.invalidate()
    node_sizes.forget()
    yield


@pytest.fixture(autouse=True)
def _attempts_written():
    """A cycle that wrote its attempts behind has written them, and the writer's session is closed, when a test ends:
    the next test's database flush and the test database's removal find no other session."""
    from scheduling.diagnostics.attempts import attempts_writer

    yield
    attempts_writer.close()


@pytest.fixture(autouse=True)
def _empty_immediate_queue(request):
    """Each test starts with an empty immediate queue."""
    if "django_db_setup" in request.fixturenames or request.node.get_closest_marker("django_db"):
        immediate_queue.connection().delete(immediate_queue.QUEUE_KEY)
    yield


@pytest.fixture
def fgd_window(monkeypatch):
    """fgd's recent-task window under a key of this test's own (tests of one worker share its database's key);
    yields a function recording a task's shape into it."""
    import random

    from scheduling.plugins.fgd import recent

    key = f"{recent.window_key()}:test:{random.randrange(1 << 30)}"
    monkeypatch.setattr(recent, "window_key", lambda: key)
    recent.forget_cached()
    yield recent.record_shape
    recent.clear_window()


@pytest.fixture
def admin_user(db):
    return get_user_model().objects.create_user(username="admin", password="admin-password", is_staff=True,
                                                is_superuser=True)


@pytest.fixture
def admin_client(admin_user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user=admin_user)[1]}")
    return client


@pytest.fixture
def tenant(db):
    return Tenant.objects.create(name="acme")


@pytest.fixture
def other_tenant(db):
    return Tenant.objects.create(name="globex")


def _tenant_client(tenant, username):
    user, token = tenant_user_create(tenant=tenant, username=username, password="tenant-password")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    client.user, client.token = user, token
    return client


@pytest.fixture
def tenant_client(tenant):
    return _tenant_client(tenant, "alice")


@pytest.fixture
def other_tenant_client(other_tenant):
    return _tenant_client(other_tenant, "bob")
