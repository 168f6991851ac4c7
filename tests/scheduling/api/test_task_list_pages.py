import re

import pytest

from scheduling.framework import reasons
from scheduling.models import Task
from scheduling.plugins.affinity import ZONE_MISMATCH
from scheduling.plugins.availability import NODE_OFFLINE
from scheduling.plugins.resource_prefilter import INSUFFICIENT_GPU, INSUFFICIENT_GPU_MEMORY
from scheduling.plugins.tenant import DEDICATED_OTHER_TENANT
from tests.factories import make_task


@pytest.fixture
def tasks(tenant):
    return [make_task(tenant=tenant) for _ in range(7)]


def _ids(response) -> list[int]:
    return [task["id"] for task in response.json()]


@pytest.mark.django_db
def test_a_page_is_a_plain_array_newest_first_with_the_total_and_the_next_page_in_headers(tenant_client, tasks):
    response = tenant_client.get("/api/v1/tasks?limit=3")

    assert response.status_code == 200
    assert _ids(response) == [task.id for task in reversed(tasks)][:3]
    assert response["X-Total-Count"] == "7"
    next_url = re.search(r'<([^>]+)>; rel="next"', response["Link"]).group(1)
    assert "limit=3" in next_url and "offset=3" in next_url
    assert 'rel="prev"' not in response["Link"]


@pytest.mark.django_db
def test_following_the_links_reads_every_task_once(tenant_client, tasks):
    seen, url = [], "/api/v1/tasks?limit=3"
    while url:
        response = tenant_client.get(url)
        seen += _ids(response)
        found = re.search(r'<([^>]+)>; rel="next"', response.get("Link", ""))
        url = found.group(1) if found else None
    assert sorted(seen) == sorted(task.id for task in tasks) and len(seen) == 7


@pytest.mark.django_db
def test_without_a_limit_a_page_holds_the_default_hundred(tenant_client, tenant):
    Task.objects.bulk_create([Task(tenant=tenant, name=f"bulk-{index}") for index in range(105)])

    response = tenant_client.get("/api/v1/tasks")

    assert len(response.json()) == 100 and response["X-Total-Count"] == "105"


@pytest.mark.django_db
@pytest.mark.parametrize("query,field", [
    ("limit=0", "limit"), ("limit=501", "limit"), ("limit=ten", "limit"), ("limit=²", "limit"),
    ("offset=-1", "offset"), ("offset=99999999999", "offset"),
])
def test_a_bad_limit_or_offset_is_a_400_naming_it(tenant_client, tasks, query, field):
    response = tenant_client.get(f"/api/v1/tasks?{query}")

    assert response.status_code == 400
    assert field in response.json()["errors"]


@pytest.mark.django_db
def test_the_total_counts_only_the_tenants_own_tasks(tenant_client, tasks, other_tenant):
    make_task(tenant=other_tenant)

    assert tenant_client.get("/api/v1/tasks")["X-Total-Count"] == "7"


@pytest.mark.django_db
@pytest.mark.parametrize("query,field", [("tenant=null", "tenant"), ("status=sleeping", "status")])
def test_a_bad_filter_is_a_400_in_the_apis_error_shape(tenant_client, query, field):
    body = tenant_client.get(f"/api/v1/tasks?{query}").json()

    assert body["code"] and body["message"] and field in body["errors"]


@pytest.fixture
def attempted(tenant):
    from scheduling.models import SchedulingAttempt

    task = make_task(tenant=tenant)
    SchedulingAttempt.objects.create(
        task=task, code="InsufficientResources", message="0/2 nodes are available: 2 Insufficient GPU.",
        nodes={"filtered": {"Insufficient GPU": ["a", "b"]}, "plugins": [], "scored": []})
    return task


@pytest.mark.django_db
def test_a_list_carries_each_attempts_code_and_message_only_unless_asked_for_all(tenant_client, attempted):
    summary = {"code": "InsufficientResources", "message": "0/2 nodes are available: 2 Insufficient GPU."}

    assert tenant_client.get("/api/v1/tasks").json()[0]["diagnostics"] == summary
    assert tenant_client.get("/api/v1/tasks?diagnostics=summary").json()[0]["diagnostics"] == summary
    full = tenant_client.get("/api/v1/tasks?diagnostics=full").json()[0]["diagnostics"]
    assert [entry["node"] for entry in full["nodes"]] == ["a", "b"]
    detail = tenant_client.get(f"/api/v1/tasks/{attempted.id}").json()["diagnostics"]
    assert [entry["node"] for entry in detail["nodes"]] == ["a", "b"]


def _large_attempt(task: Task):
    """An attempt as a cycle stores it on a 5,000-node cluster: 200 filtered nodes named, the best 50 scored."""
    from scheduling.models import SchedulingAttempt

    plugins = ["spread", "gpu-topology", "rdma", "node-pools", "fgd"]
    return SchedulingAttempt(
        task=task, code="InsufficientResources",
        message=reasons.summarize(5000, {INSUFFICIENT_GPU: 2310, "GPU type mismatch": 1204,
                                         INSUFFICIENT_GPU_MEMORY: 650, ZONE_MISMATCH: 402,
                                         DEDICATED_OTHER_TENANT: 230, NODE_OFFLINE: 204}),
        nodes={"filtered": {"Insufficient GPU": [f"gpu-node-{index:05d}" for index in range(150)],
                            "GPU type mismatch": [f"gpu-node-{index:05d}" for index in range(150, 200)]},
               "plugins": plugins,
               "scored": [[f"gpu-node-{index:05d}", 87.25, *[17.45] * len(plugins)] for index in range(200, 250)]},
        extra={"filtered_nodes_not_listed": 4800})


@pytest.mark.django_db
def test_a_list_of_100_tasks_with_large_attempts_is_at_most_100_kb(tenant_client, tenant):
    from scheduling.models import SchedulingAttempt

    tasks = Task.objects.bulk_create(
        Task(tenant=tenant, name=f"training-run-{index:04d}", image="registry.example.com/team/trainer:2026.11",
             command="python train.py --config configs/large.yaml --epochs 90", gpu_type="nvidia", gpu_required=4,
             cpu_cores=16, memory_mb=65536, labels={"zone": "cn-north-a", "nvlink": "required"})
        for index in range(100))
    SchedulingAttempt.objects.bulk_create(_large_attempt(task) for task in tasks)

    listed = tenant_client.get("/api/v1/tasks?limit=100")
    full = tenant_client.get("/api/v1/tasks?limit=100&diagnostics=full")

    # ~1 KB a task: its fields (env, timeout, grace and queue position among them) and the attempt's summary.
    assert len(listed.json()) == 100 and len(listed.content) <= 110_000
    # What the list carried before: each task's per-node entries.
    assert len(full.content) > 1_000_000


@pytest.mark.django_db
def test_an_unknown_diagnostics_mode_is_a_400_naming_it(tenant_client, attempted):
    response = tenant_client.get("/api/v1/tasks?diagnostics=everything")

    assert response.status_code == 400 and "diagnostics" in response.json()["errors"]


@pytest.mark.django_db
def test_a_listed_task_is_the_task_s_own_representation_with_the_diagnostics_summary(tenant_client, admin_client,
                                                                                    tenant):
    # The list builds its tasks from rows, not through TaskOutput: every field, set and unset, in TaskOutput's order.
    from datetime import datetime, timedelta, timezone

    from scheduling.models import SchedulingAttempt, TaskGroup
    from tests.factories import make_node

    moment = datetime(2026, 11, 3, 4, 5, 6, 789012, tzinfo=timezone.utc)
    group = TaskGroup.objects.create(tenant=tenant, name="replicas", type="inference", world_size=2)
    everything = make_task(
        tenant=tenant, type="inference", image="trainer:1", command="python train.py", gpu_type="nvidia",
        gpu_required=2, gpu_memory_mb=40960, gpu_compute_percent=50, cpu_cores=7.5, memory_mb=8192, priority=80,
        preemptible=True, labels={"zone": "a", "ünï": "cødé"}, tolerations=[{"key": "gpu", "effect": "NoSchedule"}],
        node_selector={"rack": "r1"}, group=group, rank=1, status="running", reason="placed", node=make_node(),
        gpus=[0, 1], port=8123, shard={"cards": [0, 1], "share": 0.5}, borrowed=True, preempt_count=3,
        reserved_at=moment, deadline=moment + timedelta(days=1), scheduled_at=moment, started_at=moment,
        finished_at=moment + timedelta(seconds=1))
    SchedulingAttempt.objects.create(task=everything, code="Unschedulable", message="0/1 nodes are available",
                                     nodes={"filtered": {"x": ["node-a"]}})
    bare = make_task(tenant=tenant)

    for client in (tenant_client, admin_client):
        listed = client.get("/api/v1/tasks").json()
        one_by_one = [client.get(f"/api/v1/tasks/{task.id}").json() for task in (bare, everything)]
        for task in one_by_one:
            if task["diagnostics"] is not None:
                task["diagnostics"] = {"code": task["diagnostics"]["code"], "message": task["diagnostics"]["message"]}
        assert [list(task.items()) for task in listed] == [list(task.items()) for task in one_by_one]
    assert listed[1]["diagnostics"] == {"code": "Unschedulable", "message": "0/1 nodes are available"}
    assert listed[1]["finished_at"] == "2026-11-03T04:05:07.789012Z" and listed[0]["node"] is None
