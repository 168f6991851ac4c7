from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from scheduling import lifecycle
from scheduling.api.task_apis import TaskOutput
from scheduling.models import SchedulingAttempt, Task
from tests.factories import make_task

VALID = {"name": "resnet", "type": "batch", "gpu_type": "nvidia", "gpu_required": 2, "priority": 60}


@pytest.mark.django_db
def test_tenant_submits_a_pending_task_for_its_own_tenant(tenant_client, tenant):
    response = tenant_client.post("/api/v1/tasks", VALID, format="json")

    assert response.status_code == 201, response.data
    assert response.data["status"] == "pending"
    assert response.data["tenant"] == tenant.id
    assert Task.objects.get(id=response.data["id"]).tenant == tenant


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["require_nvlink", "topology_constraints"])
def test_unknown_top_level_field_is_a_400_naming_it(tenant_client, field):
    response = tenant_client.post("/api/v1/tasks", {**VALID, field: True}, format="json")

    assert response.status_code == 400
    assert field in response.data["errors"]
    assert not Task.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "field,value",
    [("priority", 101), ("priority", -1), ("gpu_required", -1), ("gpu_memory_mb", -5), ("cpu_cores", -1),
     ("memory_mb", -1), ("gpu_compute_percent", 0), ("gpu_compute_percent", 101), ("type", "cron"),
     ("gpu_type", "tpu"), ("labels", "nvlink"), ("name", "")],
)
def test_out_of_range_fields_are_400s_naming_the_field(tenant_client, field, value):
    response = tenant_client.post("/api/v1/tasks", {**VALID, field: value}, format="json")

    assert response.status_code == 400
    assert field in response.data["errors"]
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_training_and_preemptible_is_a_400_naming_preemptible(tenant_client):
    """design §17.1, the seed's rule: a 400, which the published schema states too (`if`/`then`)."""
    response = tenant_client.post("/api/v1/tasks", {**VALID, "type": "training", "preemptible": True}, format="json")

    assert response.status_code == 400
    assert (response.data["code"], response.data["field"]) == ("invalid", "preemptible")
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_tenant_user_may_not_name_a_tenant(tenant_client, other_tenant):
    response = tenant_client.post("/api/v1/tasks", {**VALID, "tenant": other_tenant.id}, format="json")

    assert response.status_code == 403
    assert "tenant" in response.data["errors"]
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_admin_submits_for_a_named_tenant_and_must_name_one(admin_client, tenant):
    assert admin_client.post("/api/v1/tasks", VALID, format="json").status_code == 403

    response = admin_client.post("/api/v1/tasks", {**VALID, "tenant": tenant.id}, format="json")
    assert response.status_code == 201
    assert response.data["tenant"] == tenant.id


@pytest.mark.django_db
def test_another_tenants_task_is_a_404_everywhere(tenant_client, other_tenant):
    foreign = make_task(tenant=other_tenant)

    assert tenant_client.get(f"/api/v1/tasks/{foreign.id}").status_code == 404
    assert tenant_client.post(f"/api/v1/tasks/{foreign.id}/stop").status_code == 404
    assert tenant_client.get("/api/v1/tasks").data == []
    foreign.refresh_from_db()
    assert foreign.status == "pending"


@pytest.mark.django_db
def test_list_filters_by_status_and_admin_sees_all(admin_client, tenant, other_tenant):
    running = make_task(tenant=tenant, status="running")
    make_task(tenant=other_tenant, status="pending")

    assert len(admin_client.get("/api/v1/tasks").data) == 2
    filtered = admin_client.get("/api/v1/tasks", {"status": "running"}).data
    assert [task["id"] for task in filtered] == [running.id]
    assert admin_client.get("/api/v1/tasks", {"status": "sleeping"}).status_code == 400


@pytest.mark.django_db
def test_stop_moves_pending_to_stopped_and_running_to_stopping(tenant_client, tenant):
    pending = make_task(tenant=tenant)
    running = make_task(tenant=tenant, status="running")

    assert tenant_client.post(f"/api/v1/tasks/{pending.id}/stop").data["status"] == "stopped"
    assert tenant_client.post(f"/api/v1/tasks/{running.id}/stop").data["status"] == "stopping"
    assert tenant_client.post(f"/api/v1/tasks/{pending.id}/stop").status_code == 409


@pytest.mark.django_db
def test_requests_without_credentials_or_with_a_bad_token_are_refused():
    assert APIClient().get("/api/v1/tasks").status_code in (401, 403)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.get("/api/v1/tasks").status_code == 401


@pytest.mark.django_db
def test_detail_returns_placement_and_diagnostics_fields(tenant_client, tenant):
    task = make_task(tenant=tenant)

    body = tenant_client.get(f"/api/v1/tasks/{task.id}").data

    for field in ("node", "gpus", "port", "preempt_count", "diagnostics"):
        assert field in body


@pytest.mark.django_db
def test_detail_lists_each_node_of_the_compactly_stored_attempt_with_its_reason_or_scores(tenant_client, tenant):
    task = make_task(tenant=tenant)
    SchedulingAttempt.objects.create(
        task=task, code="Scheduled", message="1/4 nodes are available: 2 node offline, 1 Insufficient GPU.",
        nodes={"filtered": {"node offline": ["off-1", "off-2"], "Insufficient GPU": ["full"]},
               "plugins": ["spread", "nvlink"], "scored": [["free", 140.5, 80.5, 60.0]]},
        extra={"bound": "bound to free"},
    )

    diagnostics = tenant_client.get(f"/api/v1/tasks/{task.id}").json()["diagnostics"]

    assert diagnostics == {
        "code": "Scheduled", "message": "1/4 nodes are available: 2 node offline, 1 Insufficient GPU.",
        "bound": "bound to free",
        "nodes": [
            {"node": "off-1", "reason": "node offline", "scores": {}, "total": None},
            {"node": "off-2", "reason": "node offline", "scores": {}, "total": None},
            {"node": "full", "reason": "Insufficient GPU", "scores": {}, "total": None},
            {"node": "free", "reason": None, "scores": {"spread": 80.5, "nvlink": 60.0}, "total": 140.5},
        ],
    }


@pytest.mark.django_db
def test_submit_and_a_list_of_attempted_tasks_take_a_fixed_number_of_statements(tenant_client, tenant,
                                                                                 django_assert_max_num_queries):
    for index in range(5):
        SchedulingAttempt.objects.create(task=make_task(tenant=tenant, name=f"t{index}"), code="Unschedulable",
                                         message="0/1 nodes are available", nodes={"filtered": {"x": ["a"]}})

    # Authentication (token, user and tenant at once), the pending cap, the insert in its savepoint, the node sizes
    # its NeverFits warning reads (nodes, cards); the answer is the task in hand, not read back.
    with django_assert_max_num_queries(7):
        assert tenant_client.post("/api/v1/tasks", VALID, format="json").status_code == 201
    # Authentication, the total, the page with each task's attempt.
    with django_assert_max_num_queries(3):
        assert len(tenant_client.get("/api/v1/tasks", {"limit": 100}).json()) == 6


@pytest.mark.django_db
@pytest.mark.parametrize("body,field", [
    ({"timeout_seconds": 59}, "timeout_seconds"),
    ({"timeout_seconds": 30 * 24 * 3600 + 1}, "timeout_seconds"),
    ({"timeout_seconds": "1h"}, "timeout_seconds"),
    ({"termination_grace_seconds": -1}, "termination_grace_seconds"),
    ({"termination_grace_seconds": 601}, "termination_grace_seconds"),
    ({"termination_grace_seconds": None}, "termination_grace_seconds"),
])
def test_a_timeout_or_grace_out_of_bounds_is_a_400_naming_it(tenant_client, body, field):
    """design §17.1: 60 s to 30 days or null; 0 to 600 s."""
    response = tenant_client.post("/api/v1/tasks", {**VALID, **body}, format="json")

    assert response.status_code == 400
    assert response.data["field"] == field
    assert not Task.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("body", [
    VALID,
    {"name": "fractional", "type": "inference", "image": "serve:2", "command": "python serve.py", "gpu_type": "ascend",
     "gpu_memory_mb": 4096, "gpu_compute_percent": 30, "cpu_cores": 2.5, "memory_mb": 8192, "preemptible": True,
     "labels": {"team": "vision"}, "node_selector": {"zone": "b"}, "env": {"A": "1"},
     "tolerations": [{"key": "pool", "operator": "Equal", "value": "big", "effect": "NoSchedule"}]},
    {"name": "due", "image": "etl:1", "cpu_cores": 1, "memory_mb": 512, "deadline": "in 30 days, +08:00",
     "timeout_seconds": 3600, "termination_grace_seconds": 0},
])
def test_the_created_answer_is_the_task_as_read_back(tenant_client, tenant, body, settings):
    """The 201 is built from the task in hand (no read-back): it must equal the task's representation read from the
    database, every field."""
    settings.TIME_ZONE = "Asia/Shanghai"
    if "deadline" in body:
        due = (timezone.now() + timedelta(days=30)).astimezone(timezone.get_fixed_timezone(8 * 60))
        body = {**body, "deadline": due.isoformat()}
    answer = tenant_client.post("/api/v1/tasks", body, format="json")

    assert_answer_is_the_task_read_back(answer, tenant)


@pytest.mark.django_db
def test_the_resubmitted_answer_is_the_new_task_as_read_back(tenant_client, tenant):
    done = make_task(tenant=tenant, name="train", image="img:1", gpu_required=1, labels={"a": "b"},
                     status=lifecycle.FAILED, reason="exit code 1")
    again = tenant_client.post(f"/api/v1/tasks/{done.id}/resubmit")

    assert_answer_is_the_task_read_back(again, tenant)


def assert_answer_is_the_task_read_back(answer, tenant) -> None:
    """A 201 for a new task equals TaskOutput of the task read from the database, every field, and warns of nothing."""
    assert answer.status_code == 201, answer.content
    created = answer.json()
    assert created.pop("warnings") == []
    read_back = TaskOutput(Task.objects.select_related("tenant", "node", "attempt").get(id=created["id"]),
                           context={"viewer_tenant_id": tenant.id}).data
    assert created == read_back
