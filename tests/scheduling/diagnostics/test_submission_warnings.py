"""At submit time, work no registered node could ever hold comes back with a `NeverFits` warning (API, form); a task
asking for nothing at all is refused."""

import pytest

from scheduling.models import Task
from tests.factories import make_node

pytestmark = pytest.mark.django_db


def test_the_submit_response_warns_of_work_no_node_could_ever_hold(tenant_client):
    make_node(cards=8)
    created = tenant_client.post("/api/v1/tasks", {"name": "huge", "gpu_type": "nvidia", "gpu_required": 64},
                                 format="json")
    assert created.status_code == 201, "accepted: nodes may join later"
    [warning] = created.json()["warnings"]
    assert warning["code"] == "NeverFits"
    assert "64 GPUs (at most 8 on one node)" in warning["message"] and "world_size" in warning["message"]

    fits = tenant_client.post("/api/v1/tasks", {"name": "fits", "gpu_type": "nvidia", "gpu_required": 8},
                              format="json")
    assert fits.status_code == 201 and fits.json()["warnings"] == []


def test_a_group_whose_member_no_node_could_hold_is_warned_of(tenant_client):
    make_node(cards=8)
    created = tenant_client.post("/api/v1/task-groups", {"name": "wide", "type": "training", "world_size": 2,
                                                         "gpus_per_worker": 16}, format="json")
    assert created.status_code == 201
    assert [warning["code"] for warning in created.json()["warnings"]] == ["NeverFits"]


def test_a_task_asking_for_nothing_is_a_400_naming_a_field_and_writes_nothing(tenant_client):
    response = tenant_client.post("/api/v1/tasks", {"name": "empty"}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "image" and "must ask for something" in response.json()["message"]
    assert not Task.objects.exists()
    for something in ({"image": "busybox"}, {"command": "true"}, {"cpu_cores": 0.5}, {"memory_mb": 1},
                      {"gpu_memory_mb": 1024}, {"gpu_required": 1}):
        assert tenant_client.post("/api/v1/tasks", {"name": "t", **something}, format="json").status_code == 201


def test_the_form_shows_the_warning_on_the_task_page(tenant_web):
    make_node(cards=8)
    response = tenant_web.post("/tasks/new/", {"name": "huge", "type": "batch", "image": "img:1", "command": "",
                                               "gpu_type": "nvidia", "gpu_required": "64", "gpu_memory_mb": "",
                                               "gpu_compute_percent": "", "cpu_cores": "", "memory_mb": "",
                                               "priority": "50"}, follow=True)
    page = response.content.decode()
    assert response.status_code == 200 and 'class="flash flash-warning"' in page
    assert "NeverFits: no registered nvidia node can ever hold this task" in page


def test_the_form_refuses_a_task_asking_for_nothing_beside_the_image_field(tenant_web):
    response = tenant_web.post("/tasks/new/", {"name": "empty", "type": "batch", "image": "", "command": "",
                                               "gpu_type": "", "gpu_required": "", "gpu_memory_mb": "",
                                               "gpu_compute_percent": "", "cpu_cores": "", "memory_mb": "",
                                               "priority": "50"})
    assert response.status_code == 400
    assert '<div class="field-error" data-field="image">' in response.content.decode()
    assert not Task.objects.exists()

