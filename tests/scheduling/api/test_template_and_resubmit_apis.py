"""Task templates (`/api/v1/task-templates`) and resubmission (`POST /api/v1/tasks/{id}/resubmit`), through the API
and the pages: a tenant's own only, bad input refused with nothing written."""

import pytest

from scheduling import lifecycle
from scheduling.models import Task, TaskTemplate
from tests.factories import make_task

pytestmark = pytest.mark.django_db


def test_a_template_is_validated_like_a_submission_and_kept_per_tenant(tenant_client, other_tenant_client):
    created = tenant_client.post("/api/v1/task-templates", {"name": "resnet", "fields": {
        "image": "img:1", "gpu_required": 2, "labels": {"team": "vision"}}}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["fields"]["gpu_required"] == 2 and "name" not in body["fields"] and "priority" not in body["fields"]

    bad = tenant_client.post("/api/v1/task-templates", {"name": "bad", "fields": {"gpu_required": -1}},
                             format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "fields.gpu_required"
    taken = tenant_client.post("/api/v1/task-templates", {"name": "resnet", "fields": {"image": "img:2"}},
                               format="json")
    assert taken.status_code == 409 and taken.json()["field"] == "name"
    assert TaskTemplate.objects.count() == 1

    assert other_tenant_client.get("/api/v1/task-templates").json() == []
    assert other_tenant_client.get(f"/api/v1/task-templates/{body['id']}").status_code == 404
    assert other_tenant_client.delete(f"/api/v1/task-templates/{body['id']}").status_code == 404
    assert tenant_client.delete(f"/api/v1/task-templates/{body['id']}").status_code == 204
    assert not TaskTemplate.objects.exists()


def test_an_admin_names_the_tenant_of_a_template(admin_client, tenant):
    missing = admin_client.post("/api/v1/task-templates", {"name": "t", "fields": {"image": "img:1"}},
                                format="json")
    assert missing.status_code == 403 and missing.json()["field"] == "tenant"
    made = admin_client.post("/api/v1/task-templates", {"name": "t", "fields": {"image": "img:1"},
                                                        "tenant": tenant.id}, format="json")
    assert made.status_code == 201 and made.json()["tenant"] == tenant.id


def test_resubmit_copies_a_finished_task_and_refuses_active_others_and_members(tenant_client, other_tenant_client,
                                                                               tenant):
    done = make_task(tenant=tenant, name="train", image="img:1", gpu_required=1, labels={"a": "b"},
                     status=lifecycle.FAILED, reason="exit code 1")
    again = tenant_client.post(f"/api/v1/tasks/{done.id}/resubmit")
    assert again.status_code == 201
    body = again.json()
    assert (body["name"], body["image"], body["gpu_required"], body["labels"], body["status"]) == (
        "train", "img:1", 1, {"a": "b"}, "pending")
    assert body["warnings"] == []

    active = tenant_client.post(f"/api/v1/tasks/{body['id']}/resubmit")
    assert active.status_code == 409 and active.json()["field"] == "status"
    assert other_tenant_client.post(f"/api/v1/tasks/{done.id}/resubmit").status_code == 404
    assert Task.objects.count() == 2


def test_the_task_page_resubmits_a_finished_task_with_one_click(tenant_web, other_tenant_web, tenant):
    done = make_task(tenant=tenant, name="train", gpu_required=1, status=lifecycle.SUCCEEDED)
    page = tenant_web.get(f"/tasks/{done.id}/").content.decode()
    assert 'id="resubmit-task"' in page
    assert other_tenant_web.post(f"/tasks/{done.id}/", {"action": "resubmit"}).status_code == 404
    response = tenant_web.post(f"/tasks/{done.id}/", {"action": "resubmit"})
    again = Task.objects.exclude(id=done.id).get()
    assert response.status_code == 302 and response["Location"] == f"/tasks/{again.id}/"
    assert 'id="resubmit-task"' not in tenant_web.get(f"/tasks/{again.id}/").content.decode(), "pending: stop only"


FORM = {"name": "", "type": "batch", "image": "img:1", "command": "python train.py", "gpu_type": "nvidia",
        "gpu_required": "2", "gpu_memory_mb": "", "gpu_compute_percent": "", "cpu_cores": "", "memory_mb": "",
        "priority": "", "label_key": ["team"], "label_value": ["vision"]}


def test_the_form_saves_a_template_and_starts_from_it(tenant_web, other_tenant_web):
    response = tenant_web.post("/tasks/new/", {**FORM, "action": "save_template", "template_name": "resnet"})
    template = TaskTemplate.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/tasks/new/?template={template.id}"
    assert not Task.objects.exists(), "saving a template submits nothing"
    assert template.fields["gpu_required"] == 2 and template.fields["labels"] == {"team": "vision"}

    page = tenant_web.get(f"/tasks/new/?template={template.id}").content.decode()
    assert 'id="start-from-template"' in page and 'value="img:1"' in page and 'value="vision"' in page
    assert other_tenant_web.get(f"/tasks/new/?template={template.id}").status_code == 404

    again = tenant_web.post("/tasks/new/", {**FORM, "action": "save_template", "template_name": "resnet"})
    assert again.status_code == 400
    assert '<div class="field-error" data-field="template_name">' in again.content.decode()
    unnamed = tenant_web.post("/tasks/new/", {**FORM, "action": "save_template", "template_name": ""})
    assert unnamed.status_code == 400 and 'data-field="template_name"' in unnamed.content.decode()
    assert TaskTemplate.objects.count() == 1
