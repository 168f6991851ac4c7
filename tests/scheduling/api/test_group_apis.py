import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.cycle.run import run_cycle
from scheduling.groups.replicas import create_member, rebuild_inference_groups
from scheduling.groups.services import task_group_create
from scheduling.models import Task, TaskGroup
from scheduling.services.agent_reports import agent_report_status
from tests.factories import make_node


@pytest.mark.django_db
def test_training_group_creates_ranked_pending_members(tenant_client):
    response = tenant_client.post("/api/v1/task-groups", {
        "name": "llm", "type": "training", "world_size": 4, "gpus_per_worker": 8, "gpu_type": "nvidia",
        "parallelism": "data"}, format="json")

    assert response.status_code == 201, response.data
    members = response.data["members"]
    assert [member["rank"] for member in members] == [0, 1, 2, 3]
    assert {Task.objects.get(id=member["task"]).gpu_required for member in members} == {8}
    assert {member["node"] for member in members} == {None}


@pytest.mark.django_db
@pytest.mark.parametrize("body,field,status", [
    ({"world_size": 0}, "world_size", 400),
    ({"parallelism": "magic"}, "parallelism", 400),
    ({"replicas": 2}, "replicas", 400),          # a training group has no replicas: the schema says so (if/then)
    ({"window": {"start": "09:00", "end": "18:00", "action": "pause"}}, "window", 400),
    ({"timeout_seconds": 59}, "timeout_seconds", 400),
    ({"termination_grace_seconds": 601}, "termination_grace_seconds", 400),
    ({"elastic": True}, "elastic", 400),
    ({"max_restarts": -1}, "max_restarts", 400),
    ({"max_restarts": "often"}, "max_restarts", 400),
    ({"type": "inference", "window": {"start": "09:00", "end": "18:00", "action": "scale"}}, "window", 403),
    # design §17.1: replicas over several nodes are of inference groups, with cards, within reason.
    ({"nodes_per_replica": 2}, "nodes_per_replica", 400),
    ({"type": "inference", "nodes_per_replica": 0}, "nodes_per_replica", 400),
    ({"type": "inference", "nodes_per_replica": 65}, "nodes_per_replica", 400),
    ({"type": "inference", "nodes_per_replica": 2, "gpus_per_worker": 0}, "nodes_per_replica", 400),
])
def test_bad_group_input_names_the_field_and_creates_nothing(tenant_client, body, field, status):
    base = {"name": "g", "type": "training", "world_size": 2, "gpus_per_worker": 1}
    response = tenant_client.post("/api/v1/task-groups", {**base, **body}, format="json")

    assert response.status_code == status
    assert field in response.data["errors"]
    assert not TaskGroup.objects.exists() and not Task.objects.exists()


@pytest.mark.django_db
def test_groups_are_tenant_scoped(tenant_client, other_tenant_client):
    created = tenant_client.post("/api/v1/task-groups", {"name": "g", "type": "training", "world_size": 2,
                                                         "gpus_per_worker": 1}, format="json").data

    assert other_tenant_client.get(f"/api/v1/task-groups/{created['id']}").status_code == 404
    assert other_tenant_client.get("/api/v1/task-groups").data == []
    assert tenant_client.get(f"/api/v1/task-groups/{created['id']}").status_code == 200


@pytest.mark.django_db
def test_inference_rebuild_creates_missing_replicas(tenant_client):
    created = tenant_client.post("/api/v1/task-groups", {"name": "svc", "type": "inference", "world_size": 1,
                                                         "gpus_per_worker": 1, "replicas": 3}, format="json").data
    group = TaskGroup.objects.get(id=created["id"])
    first = group.members.order_by("rank").first()
    Task.objects.filter(id=first.id).update(status="failed")

    assert rebuild_inference_groups() == 1
    assert group.members.filter(status="pending").count() == 3
    assert rebuild_inference_groups() == 0


@pytest.mark.django_db
def test_max_restarts_defaults_to_three_and_can_be_set(tenant_client):
    base = {"type": "training", "world_size": 2, "gpus_per_worker": 1}
    default = tenant_client.post("/api/v1/task-groups", {"name": "a", **base}, format="json").data
    chosen = tenant_client.post("/api/v1/task-groups", {"name": "b", "max_restarts": 0, **base}, format="json").data

    assert (default["max_restarts"], default["restarts"], default["status"]) == (3, 0, "pending")
    assert chosen["max_restarts"] == 0
    assert TaskGroup.objects.get(id=chosen["id"]).max_restarts == 0


@pytest.mark.django_db
def test_the_group_list_is_paged_like_tasks_and_reads_members_once_per_page(tenant_client, tenant):
    """issue 27 item 10: the list returned 200 groups with all members, one query per group."""
    for index in range(5):
        task_group_create(tenant=tenant, name=f"g{index}", type="training", world_size=2, gpus_per_worker=1)
    with CaptureQueriesContext(connection) as few:
        tenant_client.get("/api/v1/task-groups?limit=2")
    with CaptureQueriesContext(connection) as more:
        response = tenant_client.get("/api/v1/task-groups?limit=4")

    assert len(response.json()) == 4 and response["X-Total-Count"] == "5"
    assert 'rel="next"' in response["Link"]
    assert all(len(group["members"]) == 2 for group in response.json())
    assert len(more.captured_queries) == len(few.captured_queries)
    assert tenant_client.get("/api/v1/task-groups?limit=0").status_code == 400


@pytest.mark.django_db
def test_a_group_takes_labels_for_every_member_checked_like_a_tasks(tenant_client):
    created = tenant_client.post("/api/v1/task-groups", {"name": "svc", "type": "inference", "world_size": 2,
                                                         "gpus_per_worker": 1, "labels": {"team": "search"}},
                                 format="json")
    assert created.status_code == 201 and created.json()["labels"] == {"team": "search"}
    assert set(map(str, Task.objects.values_list("labels", flat=True))) == {str({"team": "search"})}
    group = TaskGroup.objects.get(name="svc")
    assert create_member(group, rank=5).labels == {"team": "search"}, "a rebuilt replica keeps them"
    bad = tenant_client.post("/api/v1/task-groups", {"name": "bad", "type": "training", "world_size": 2,
                                                     "gpus_per_worker": 1, "labels": {"gpu-model": "|"}},
                             format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "labels"

def test_a_group_passes_its_timeout_and_grace_to_every_member(tenant_client, settings):
    """design §17.1: a training gang has the batch default, a service none, unless the group says otherwise."""
    settings.SCHEDULER = {**settings.SCHEDULER, "default_task_timeout": 7200}
    base = {"world_size": 2, "gpus_per_worker": 1}
    gang = tenant_client.post("/api/v1/task-groups", {"name": "gang", "type": "training", **base}, format="json")
    service = tenant_client.post("/api/v1/task-groups", {"name": "svc", "type": "inference", **base,
                                                         "timeout_seconds": 86400, "termination_grace_seconds": 120},
                                 format="json")

    assert (gang.data["timeout_seconds"], gang.data["termination_grace_seconds"]) == (7200, 10)
    assert (service.data["timeout_seconds"], service.data["termination_grace_seconds"]) == (86400, 120)
    members = {group: set(Task.objects.filter(group_id=body.data["id"]).values_list(
        "timeout_seconds", "termination_grace_seconds")) for group, body in (("gang", gang), ("svc", service))}
    assert members == {"gang": {(7200, 10)}, "svc": {(86400, 120)}}


@pytest.mark.django_db
def test_a_service_of_multi_node_replicas_shows_each_members_replica_rank_and_master(tenant_client):
    for index in range(2):
        make_node(name=f"n{index}", cards=1, internal_ip=f"10.0.0.{index + 1}/24")
    created = tenant_client.post("/api/v1/task-groups", {
        "name": "llm", "type": "inference", "world_size": 1, "gpus_per_worker": 1, "replicas": 2,
        "nodes_per_replica": 2}, format="json")
    assert created.status_code == 201, created.data
    assert created.data["nodes_per_replica"] == 2
    assert [(member["replica"], member["rank"]) for member in created.data["members"]] == [(0, 0), (0, 1), (1, 0),
                                                                                         (1, 1)]
    run_cycle()
    group = TaskGroup.objects.get(id=created.data["id"])
    for task in group.members.filter(status="scheduled"):
        agent_report_status(node=task.node, task_id=task.id, from_status="scheduled", to_status="running")

    shown = tenant_client.get(f"/api/v1/task-groups/{group.id}").data

    placed = [member for member in shown["members"] if member["replica"] == 0]
    head = next(member for member in placed if member["rank"] == 0)
    assert {member["master_addr"] for member in placed} == {f"10.0.0.{int(head['node'][1:]) + 1}"}
    assert {member["backend"] for member in placed} == {"nccl"} and shown["master_addr"] == ""
    assert shown["ready_replicas"] == 1  # two members running: one replica


@pytest.mark.django_db
def test_the_published_schema_states_where_nodes_per_replica_may_be_above_one(admin_client):
    group = admin_client.get("/api/schema/?format=json").json()["components"]["schemas"]["TaskGroupInput"]

    assert group["properties"]["nodes_per_replica"]["minimum"] == 1
    rules = {json.dumps(rule["if"], sort_keys=True): rule["then"]["properties"] for rule in group["allOf"]}
    training = rules[json.dumps({"properties": {"type": {"enum": ["training"]}}, "required": ["type"]},
                                sort_keys=True)]
    cardless = rules[json.dumps({"properties": {"gpus_per_worker": {"const": 0}}, "required": ["gpus_per_worker"]},
                                sort_keys=True)]
    assert training["nodes_per_replica"] == cardless["nodes_per_replica"] == {"const": 1}
