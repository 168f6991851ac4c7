"""The priority ceiling at submission (design §16.2)."""

import pytest

from scheduling.models import Task, TaskGroup

pytestmark = pytest.mark.django_db

TASK = {"name": "resnet", "type": "batch", "gpu_type": "nvidia", "gpu_required": 1}
GROUP = {"name": "llm", "type": "training", "world_size": 2, "gpus_per_worker": 1}


def test_a_priority_above_the_ceiling_is_a_403_naming_priority_and_writes_nothing(tenant, tenant_client):
    tenant.max_priority = 40
    tenant.save()

    for path, body in (("/api/v1/tasks", TASK), ("/api/v1/task-groups", GROUP)):
        response = tenant_client.post(path, {**body, "priority": 41}, format="json")
        assert response.status_code == 403
        assert response.json()["field"] == "priority"
    assert not Task.objects.exists() and not TaskGroup.objects.exists()
    assert tenant_client.post("/api/v1/tasks", {**TASK, "priority": 40}, format="json").status_code == 201


def test_a_submission_naming_no_priority_gets_fifty_or_the_ceiling_if_lower(tenant, tenant_client):
    assert tenant_client.post("/api/v1/tasks", TASK, format="json").json()["priority"] == 50
    tenant.max_priority = 20
    tenant.save()
    assert tenant_client.post("/api/v1/tasks", TASK, format="json").json()["priority"] == 20
