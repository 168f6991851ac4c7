"""Abuse limits (issue 13 item 4): API throttles, login lockout, the pending cap, per-cycle dashboard figures."""

from unittest import mock

import pytest
from django.test import Client
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from scheduling.models import Task
from tests.nodes.conftest import agent, registered  # noqa: F401 (fixtures)

VALID = {"name": "t", "type": "batch", "gpu_required": 1}


@pytest.fixture
def low_rates(settings):
    """DRF reads the rates into a class attribute at import; the original object goes back afterwards."""
    original = SimpleRateThrottle.THROTTLE_RATES
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"anon": "2/min", "user": "3/min", "node": "2/min"}}
    SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
    yield
    SimpleRateThrottle.THROTTLE_RATES = original


@pytest.mark.django_db
def test_users_are_throttled_one_by_one(low_rates, tenant_client, other_tenant_client):
    answers = [tenant_client.get("/api/v1/tasks").status_code for _ in range(4)]
    assert answers == [200, 200, 200, 429]
    assert other_tenant_client.get("/api/v1/tasks").status_code == 200, "another user has a budget of its own"


@pytest.mark.django_db
def test_a_node_token_is_throttled_by_node(low_rates, agent):
    answers = [agent.get("/api/v1/agent/work").status_code for _ in range(3)]
    assert answers == [200, 200, 429]
    assert "Retry-After" in agent.get("/api/v1/agent/work")


@pytest.mark.django_db
def test_anonymous_callers_are_throttled_by_address(low_rates):
    client = Client()
    answers = [client.get("/api/schema/").status_code for _ in range(3)]
    assert answers == [200, 200, 429]


@pytest.mark.django_db
def test_repeated_failed_logins_lock_that_username_out(tenant_client, settings):
    settings.AXES_FAILURE_LIMIT = 3
    attacker = Client()
    for _ in range(3):
        attacker.post("/login/", {"username": "alice", "password": "wrong"})
    locked = attacker.post("/login/", {"username": "alice", "password": "tenant-password"})
    assert locked.status_code == 429 and "_auth_user_id" not in attacker.session
    other = Client(REMOTE_ADDR="198.51.100.7")
    signed_in = other.post("/login/", {"username": "alice", "password": "tenant-password"})
    assert signed_in.status_code == 302 and "_auth_user_id" in other.session, "not locked out from elsewhere"


@pytest.mark.django_db
def test_a_tenant_cannot_queue_beyond_its_pending_cap(tenant_client, other_tenant_client, settings):
    settings.HETEROFLOW_MAX_PENDING_PER_TENANT = 2
    assert [tenant_client.post("/api/v1/tasks", VALID, format="json").status_code for _ in range(2)] == [201, 201]
    refused = tenant_client.post("/api/v1/tasks", VALID, format="json")
    assert refused.status_code == 429 and refused.json()["code"] == "too_many_pending"
    group = tenant_client.post("/api/v1/task-groups", {"name": "g", "type": "training", "world_size": 2,
                                                        "gpus_per_worker": 1}, format="json")
    assert group.status_code == 429
    assert Task.objects.filter(tenant=tenant_client.user.membership.tenant).count() == 2
    assert other_tenant_client.post("/api/v1/tasks", VALID, format="json").status_code == 201


@pytest.mark.django_db
def test_dashboard_and_diagnostics_build_the_cluster_snapshot_once_per_cycle(admin_user, tenant_client):
    from django.utils import timezone

    from scheduling.cache import snapshot_builder
    from scheduling.models import CycleRecord

    admin, tenant = Client(), Client()
    admin.force_login(admin_user)
    tenant.force_login(tenant_client.user)
    with mock.patch.object(snapshot_builder, "build_snapshot", wraps=snapshot_builder.build_snapshot) as built:
        for _ in range(3):
            assert tenant.get("/").status_code == 200
            assert admin.get("/diagnostics/").status_code == 200
        assert built.call_count == 1
        CycleRecord.objects.create(started_at=timezone.now())
        before = built.call_count
        assert tenant.get("/").status_code == 200
        assert built.call_count == before + 1, "a new cycle, new figures"
