"""A task's timeline and the caller's quota (design §16.4), what `hf describe` and `hf quota` read."""

import pytest

from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task


@pytest.mark.django_db
def test_events_are_the_tasks_timeline_and_another_tenant_gets_404(tenant, tenant_client, other_tenant_client):
    task = make_task(tenant=tenant, gpu_required=1)
    assert task_transition(task.id, "pending", "scheduled", node=make_node(), gpus=[0], reason="bound")
    assert task_transition(task.id, "scheduled", "running")
    events = tenant_client.get(f"/api/v1/tasks/{task.id}/events").json()
    assert [(event["from"], event["to"], event["reason"]) for event in events] == [
        ("pending", "scheduled", "bound"), ("scheduled", "running", "")]
    assert all(event["at"] for event in events)
    refused = other_tenant_client.get(f"/api/v1/tasks/{task.id}/events")
    assert (refused.status_code, refused.json()["code"]) == (404, "not_found")


@pytest.mark.django_db
def test_quota_is_the_callers_own(tenant, other_tenant, tenant_client, other_tenant_client):
    tenant.gpu_quota = 8
    tenant.save()
    task = make_task(tenant=tenant, gpu_required=2)
    assert task_transition(task.id, "pending", "scheduled", node=make_node(), gpus=[0, 1])
    make_task(tenant=tenant)
    make_task(tenant=other_tenant, gpu_required=4)
    body = tenant_client.get("/api/v1/quota").json()
    assert (body["tenant"], body["gpu_quota"], body["gpu_used"]) == ("acme", 8, 2)
    assert (body["tasks"]["scheduled"], body["tasks"]["pending"], body["tasks"]["failed"]) == (1, 1, 0)
    theirs = other_tenant_client.get("/api/v1/quota").json()
    assert (theirs["tenant"], theirs["gpu_quota"], theirs["gpu_used"], theirs["tasks"]["pending"]) == \
        ("globex", None, 0, 1)


@pytest.mark.django_db
def test_gpu_used_counts_a_fractional_task_as_its_share_of_the_card(tenant, tenant_client):
    node = make_node(memory_mb=81920)
    make_task(tenant=tenant, gpu_memory_mb=20480, status="running", node=node, gpus=[0], card_type="nvidia",
              shard={"card": 0, "memory_limit_mb": 20480, "compute_percent": 25})
    make_task(tenant=tenant, gpu_required=1, status="running", node=node, gpus=[1])

    assert tenant_client.get("/api/v1/quota").json()["gpu_used"] == 1.25


@pytest.mark.django_db
def test_an_admin_names_the_tenant(admin_client, tenant):
    missing = admin_client.get("/api/v1/quota")
    assert (missing.status_code, missing.json()["field"]) == (403, "tenant")
    bad = admin_client.get("/api/v1/quota", {"tenant": "x"})
    assert (bad.status_code, bad.json()["field"]) == (400, "tenant")
    assert admin_client.get("/api/v1/quota", {"tenant": 999999}).status_code == 404
    assert admin_client.get("/api/v1/quota", {"tenant": tenant.id}).json()["tenant"] == "acme"


@pytest.mark.django_db
def test_quota_lists_every_gpu_type_the_cluster_has(tenant, tenant_client):
    from tenants.models import TenantGpuQuota

    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=4)
    make_node(gpu_type="ascend", cards=8)
    mixed = make_node(gpu_type="nvidia", cards=4)
    # A mixed node's minority type is a type of the cluster too.
    mixed.gpus.create(index=0, type="metax", memory_total_mb=65536)

    types = tenant_client.get("/api/v1/quota").json()["types"]

    assert [(line["gpu_type"], line["used"], line["nominal"], line["borrowed"]) for line in types] == [
        ("ascend", 0, None, 0), ("metax", 0, None, 0), ("nvidia", 0, 4, 0)]
