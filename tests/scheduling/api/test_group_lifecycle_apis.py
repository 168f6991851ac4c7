"""design §17.2: stop, scale and update an inference group through the API; the refusals write nothing."""

import pytest

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.groups.replicas import rebuild_inference_groups
from scheduling.groups.windows import apply_scheduling_windows
from scheduling.models import GroupRevision, Task, TaskGroup
from scheduling.services.task_transition import task_transition
from tests.factories import make_node

pytestmark = pytest.mark.django_db

SERVICE = {"name": "svc", "type": "inference", "world_size": 1, "gpus_per_worker": 1, "replicas": 3,
           "image": "vllm:1", "command": "serve"}


def _create(client, **changes):
    response = client.post("/api/v1/task-groups", {**SERVICE, **changes}, format="json")
    assert response.status_code == 201, response.data
    return TaskGroup.objects.get(id=response.data["id"])


def _live(group):
    return list(group.members.exclude(status__in=lifecycle.TERMINAL_STATES).order_by("rank"))


def _run(task):
    task_transition(task.id, "pending", "scheduled")
    task_transition(task.id, "scheduled", "running")


def test_stop_stops_every_replica_and_nothing_is_rebuilt(tenant_client):
    group = _create(tenant_client)
    for task in _live(group)[:2]:
        _run(task)

    response = tenant_client.post(f"/api/v1/task-groups/{group.id}/stop")

    assert response.status_code == 200, response.data
    statuses = sorted(group.members.values_list("status", flat=True))
    assert statuses == ["stopped", "stopping", "stopping"]
    assert group.members.filter(status="stopping").first().reason == "group stopped by user"
    for task in group.members.filter(status="stopping"):
        task_transition(task.id, "stopping", "stopped")
    assert rebuild_inference_groups() == 0
    group.refresh_from_db()
    assert (group.status, group.members.count()) == ("stopped", 3)


def test_a_second_stop_is_a_409_group_stopped(tenant_client):
    group = _create(tenant_client)
    tenant_client.post(f"/api/v1/task-groups/{group.id}/stop")

    response = tenant_client.post(f"/api/v1/task-groups/{group.id}/stop")

    assert (response.status_code, response.data["code"]) == (409, "group_stopped")
    for body in ({"replicas": 5}, {"image": "vllm:2"}):
        refused = tenant_client.patch(f"/api/v1/task-groups/{group.id}", body, format="json")
        assert (refused.status_code, refused.data["code"]) == (409, "group_stopped")
    assert group.members.count() == 3 and not GroupRevision.objects.filter(number=2).exists()


def test_windows_leave_a_stopped_group_alone(tenant_client):
    # A window whose action is due now would scale the group to 2; a stopped group is not touched.
    group = _create(tenant_client, window={"start": "00:00", "end": "00:01", "days": [0], "action": "scale",
                                           "scale_to": 2})
    tenant_client.post(f"/api/v1/task-groups/{group.id}/stop")

    run = apply_scheduling_windows()

    assert run.changed_groups == []
    group.refresh_from_db()
    assert (group.window_applied, group.replicas) == ("", 3)


def test_scale_up_creates_replicas_at_once_and_down_stops_the_newest(tenant_client):
    group = _create(tenant_client)

    up = tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"replicas": 5}, format="json")

    assert up.status_code == 200, up.data
    assert [task.rank for task in _live(group)] == [0, 1, 2, 3, 4]
    for task in _live(group):
        _run(task)

    down = tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"replicas": 2}, format="json")

    assert down.status_code == 200 and down.data["replicas"] == 2
    assert sorted(group.members.filter(status="stopping").values_list("rank", flat=True)) == [2, 3, 4]


def test_scale_to_zero_is_not_stopped(tenant_client):
    group = _create(tenant_client)

    zero = tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"replicas": 0}, format="json")
    back = tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"replicas": 1}, format="json")

    assert zero.status_code == 200 and zero.data["status"] == "stopped" and zero.data["stopped_at"] is None
    assert back.status_code == 200 and len(_live(group)) == 1


def test_scale_up_keeps_to_the_pending_cap(tenant_client, settings):
    settings.HETEROFLOW_MAX_PENDING_PER_TENANT = 4
    group = _create(tenant_client)

    response = tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"replicas": 5}, format="json")

    assert response.status_code == 429
    assert len(_live(group)) == 3 and TaskGroup.objects.get(id=group.id).replicas == 3


def test_scale_up_keeps_to_the_priority_ceiling(tenant_client, tenant):
    group = _create(tenant_client, priority=80)
    tenant.max_priority = 60
    tenant.save()

    response = tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"replicas": 4}, format="json")

    assert (response.status_code, response.data["field"]) == (403, "priority")
    assert len(_live(group)) == 3


def test_scale_while_a_window_holds_the_group_is_a_409_naming_the_window(tenant_client):
    group = _create(tenant_client)
    TaskGroup.objects.filter(id=group.id).update(
        window={"days": [0, 1], "start": "09:00", "end": "18:00", "timezone": "UTC", "action": "pause"},
        window_applied="pause")

    response = tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"replicas": 5}, format="json")

    assert (response.status_code, response.data["code"]) == (409, "window_active")
    assert "09:00–18:00" in response.data["message"] and "pause" in response.data["message"]
    assert len(_live(group)) == 3


@pytest.mark.parametrize("body,field,status", [
    ({"replicas": -1}, "replicas", 400),
    ({"replicas": 100000}, "replicas", 400),
    ({"image": "vllm:1", "command": "serve"}, "image", 409),  # no change
    ({}, "replicas", 400),
    ({"env": {"CUDA_VISIBLE_DEVICES": "0"}}, "env", 400),
    ({"env": {"lower": "x"}}, "env", 400),
    ({"colour": "red"}, "colour", 400),
])
def test_bad_changes_name_the_field_and_write_nothing(tenant_client, body, field, status):
    group = _create(tenant_client)

    response = tenant_client.patch(f"/api/v1/task-groups/{group.id}", body, format="json")

    assert response.status_code == status, response.data
    assert response.data["field"].split(".")[0] == field
    assert len(_live(group)) == 3 and GroupRevision.objects.filter(group=group).count() == 1
    assert TaskGroup.objects.get(id=group.id).image == "vllm:1"


def test_a_training_group_takes_no_patch(tenant_client):
    created = tenant_client.post("/api/v1/task-groups", {"name": "t", "type": "training", "world_size": 2,
                                                         "gpus_per_worker": 1}, format="json").data

    response = tenant_client.patch(f"/api/v1/task-groups/{created['id']}", {"replicas": 3}, format="json")

    assert (response.status_code, response.data["code"], response.data["field"]) == (409, "not_inference",
                                                                                      "replicas")
    assert Task.objects.filter(group_id=created["id"]).count() == 2


def test_bad_readiness_is_a_400_naming_the_field(tenant_client):
    for readiness, field in (({"path": "health"}, "readiness.path"), ({"path": "/h", "port": 22},
                                                                      "readiness.port")):
        response = tenant_client.post("/api/v1/task-groups", {**SERVICE, "readiness": readiness}, format="json")
        assert (response.status_code, response.data["field"]) == (400, field)
    assert not TaskGroup.objects.exists()


def test_another_tenant_cannot_touch_the_group(tenant_client, other_tenant_client):
    group = _create(tenant_client)

    assert other_tenant_client.post(f"/api/v1/task-groups/{group.id}/stop").status_code == 404
    assert other_tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"replicas": 9},
                                     format="json").status_code == 404
    assert other_tenant_client.get(f"/api/v1/task-groups/{group.id}/endpoints").status_code == 404
    assert other_tenant_client.get(f"/api/v1/task-groups/{group.id}/revisions").status_code == 404
    assert len(_live(group)) == 3 and TaskGroup.objects.get(id=group.id).stopped_at is None


def test_update_makes_a_new_revision_and_a_second_is_a_409(tenant_client):
    group = _create(tenant_client, env={"MODEL": "a"})

    response = tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"env": {"MODEL": "b"}}, format="json")
    second = tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"image": "vllm:3"}, format="json")

    assert response.status_code == 200 and response.data["revision"] == 2
    assert (second.status_code, second.data["code"]) == (409, "rollout_in_progress")
    revisions = tenant_client.get(f"/api/v1/task-groups/{group.id}/revisions").data
    assert [(r["number"], r["state"], r["env"], r["replicas"]) for r in revisions] == [
        (2, "rolling_out", {"MODEL": "b"}, 0), (1, "complete", {"MODEL": "a"}, 3)]


def test_env_reaches_the_task_and_survives_a_requeue(tenant_client, tenant):
    response = tenant_client.post("/api/v1/tasks", {"name": "t", "image": "img:1", "env": {"GREETING": "hi"}},
                                 format="json")
    task_id = response.data["id"]
    assert response.data["env"] == {"GREETING": "hi"}
    Task.objects.filter(id=task_id).update(env={"GREETING": "hi", "RANK": "0"})

    task_transition(task_id, "pending", "scheduled")
    task_transition(task_id, "scheduled", "pending")

    assert Task.objects.get(id=task_id).env == {"GREETING": "hi"}


def test_a_control_plane_variable_is_refused_by_name(tenant_client):
    response = tenant_client.post("/api/v1/tasks", {"name": "t", "env": {"MASTER_ADDR": "x"}}, format="json")

    assert response.status_code == 400 and response.data["field"] == "env.MASTER_ADDR"
    assert not Task.objects.exists()


def test_replicas_scaled_up_beyond_the_quota_wait_for_it_as_submitted_ones_do(tenant_client, tenant):
    make_node(cards=8)
    tenant.gpu_quota = 3
    tenant.save()
    group = _create(tenant_client, replicas=2)
    run_cycle()

    response = tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"replicas": 5}, format="json")
    run_cycle()

    assert response.status_code == 200
    assert group.members.filter(status="scheduled").count() == 3
    waiting = group.members.filter(status="pending").select_related("attempt")
    assert [task.attempt.code for task in waiting] == ["QuotaExceeded", "QuotaExceeded"]
