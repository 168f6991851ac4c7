"""design §16.3 node pools through the API, the forms and a real cycle: taints on nodes, tolerations and node
selectors on tasks and groups, refusals naming the field and changing nothing."""

import random

import pytest

from nodes.models import Node, NodeAuditEntry
from scheduling.cycle.run import run_cycle
from scheduling.models import SchedulingAttempt, Task, TaskGroup
from scheduling.plugins.node_pools import NODE_SELECTOR_MISMATCH, TAINT_NOT_TOLERATED
from tests.factories import make_node, make_task
from tests.web_clients import HTMX

pytestmark = pytest.mark.django_db

BIG_POOL = {"key": "pool", "value": "big", "effect": "NoSchedule"}
TOLERATE_BIG = {"key": "pool", "operator": "Equal", "value": "big", "effect": "NoSchedule"}
TASK = {"name": "resnet", "type": "batch", "gpu_type": "nvidia", "gpu_required": 2}
GANG = {"name": "llm", "type": "training", "world_size": 2, "gpus_per_worker": 1}


def test_admin_sets_taints_and_the_node_shows_them(admin_client):
    node = make_node()
    response = admin_client.patch(f"/api/v1/nodes/{node.id}", {"taints": [BIG_POOL]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["taints"] == [BIG_POOL]
    node.refresh_from_db()
    assert node.taints == [BIG_POOL]
    assert admin_client.get("/api/v1/nodes").json()[0]["taints"] == [BIG_POOL]
    assert NodeAuditEntry.objects.get().after == {"taints": [BIG_POOL]}


@pytest.mark.parametrize("taint", [{"key": "pool", "value": "big", "effect": "NoExecute"}, {"value": "x"},
                                   {"key": "pool", "effect": "NoSchedule", "colour": "red"}])
def test_a_bad_taint_is_a_400_naming_the_field_and_changes_nothing(admin_client, taint):
    node = make_node()
    response = admin_client.patch(f"/api/v1/nodes/{node.id}", {"taints": [taint]}, format="json")
    assert response.status_code == 400
    assert any(name.startswith("taints") for name in response.json()["errors"])
    node.refresh_from_db()
    assert node.taints == [] and not NodeAuditEntry.objects.exists()


def test_tenants_cannot_taint_nodes(tenant_client):
    node = make_node()
    assert tenant_client.patch(f"/api/v1/nodes/{node.id}", {"taints": [BIG_POOL]}, format="json").status_code == 403
    node.refresh_from_db()
    assert node.taints == []


def test_a_task_carries_its_tolerations_and_node_selector(tenant_client):
    response = tenant_client.post("/api/v1/tasks", {**TASK, "tolerations": [TOLERATE_BIG],
                                                    "node_selector": {"pool": "big"}}, format="json")
    assert response.status_code == 201, response.content
    assert response.data["tolerations"] == [TOLERATE_BIG] and response.data["node_selector"] == {"pool": "big"}
    task = Task.objects.get()
    assert (task.tolerations, task.node_selector) == ([TOLERATE_BIG], {"pool": "big"})


@pytest.mark.parametrize("field, value, status", [
    ("tolerations", [{"key": "pool", "operator": "Like"}], 400),
    # Which fields go with which operator: a rule of the API's, not the schema's.
    ("tolerations", [{"key": "pool", "operator": "Exists", "value": "big"}], 403),
    ("tolerations", [{"operator": "Equal", "value": "big"}], 403),
    ("tolerations", [{"key": "pool", "effect": "Sometimes"}], 400),
    ("tolerations", {"key": "pool"}, 400),
    ("node_selector", ["pool=big"], 400),
    ("node_selector", {"": "big"}, 400),
])
def test_bad_tolerations_or_selectors_are_refused_naming_the_field(tenant_client, field, value, status):
    response = tenant_client.post("/api/v1/tasks", {**TASK, field: value}, format="json")
    assert response.status_code == status
    assert any(name.startswith(field) for name in response.data["errors"]), response.data
    assert not Task.objects.exists()


def test_a_group_gives_every_member_its_tolerations_and_selector(tenant_client):
    response = tenant_client.post("/api/v1/task-groups", {**GANG, "tolerations": [TOLERATE_BIG],
                                                          "node_selector": {"pool": "big"}}, format="json")
    assert response.status_code == 201, response.content
    assert response.data["tolerations"] == [TOLERATE_BIG]
    members = Task.objects.filter(group_id=response.data["id"])
    assert [(task.tolerations, task.node_selector) for task in members] == [([TOLERATE_BIG], {"pool": "big"})] * 2


def test_a_bad_group_toleration_is_a_400_and_creates_nothing(tenant_client):
    response = tenant_client.post("/api/v1/task-groups", {**GANG, "tolerations": [{"key": "p", "operator": "No"}]},
                                  format="json")
    assert response.status_code == 400
    assert any(name.startswith("tolerations") for name in response.data["errors"])
    assert not TaskGroup.objects.exists() and not Task.objects.exists()


def test_the_cycle_keeps_untolerating_tasks_off_tainted_nodes_and_says_why(tenant):
    make_node(name="big", taints=[BIG_POOL], labels={"pool": "big"})
    make_node(name="small", cards=16, labels={"pool": "small"})
    plain = [make_task(tenant=tenant, gpu_required=2) for _ in range(2)]
    picky = make_task(tenant=tenant, gpu_required=8, node_selector={"pool": "big"})
    allowed = make_task(tenant=tenant, gpu_required=8, node_selector={"pool": "big"}, tolerations=[TOLERATE_BIG])

    run_cycle(rng=random.Random(1))

    placed = dict(Task.objects.values_list("id", "node__name"))
    assert placed[allowed.id] == "big"
    assert [placed[task.id] for task in plain].count("big") == 0
    assert placed[picky.id] is None
    message = SchedulingAttempt.objects.get(task=picky).message
    assert TAINT_NOT_TOLERATED in message and NODE_SELECTOR_MISMATCH in message


def test_the_node_page_edits_taints_and_refuses_bad_ones_beside_the_field(admin_web):
    node = make_node(cards=1)
    saved = admin_web.post(f"/nodes/{node.id}/", {"form": "taints", "taints": "pool=big:NoSchedule\n"}, **HTMX)
    assert saved.status_code == 200 and "Saved" in saved.content.decode()
    node.refresh_from_db()
    assert node.taints == [BIG_POOL]
    assert "pool=big:NoSchedule" in admin_web.get(f"/nodes/{node.id}/").content.decode()
    refused = admin_web.post(f"/nodes/{node.id}/", {"form": "taints", "taints": "pool=big:Never"}, **HTMX)
    assert refused.status_code == 400 and 'data-field="taints"' in refused.content.decode()
    assert Node.objects.get(id=node.id).taints == [BIG_POOL]


def test_the_job_form_takes_tolerations_and_a_selector(tenant_web):
    response = tenant_web.post("/tasks/new/", {"name": "j", "type": "batch", "gpu_type": "nvidia",
                                               "gpu_required": "1", "tolerations": "pool=big:NoSchedule\n*",
                                               "node_selector": "pool=big"})
    assert response.status_code == 302, response.content
    task = Task.objects.get()
    assert task.tolerations == [TOLERATE_BIG, {"key": "", "operator": "Exists", "value": "", "effect": ""}]
    assert task.node_selector == {"pool": "big"}


def test_the_forms_show_a_bad_toleration_beside_the_field_and_create_nothing(tenant_web):
    job = tenant_web.post("/tasks/new/", {"name": "j", "type": "batch", "gpu_type": "", "tolerations": "pool:Never"})
    assert job.status_code == 400 and 'data-field="tolerations"' in job.content.decode()
    group = tenant_web.post("/groups/new/", {"name": "g", "type": "training", "world_size": "2",
                                             "gpus_per_worker": "1", "node_selector": "=big"})
    assert group.status_code == 400 and 'data-field="node_selector"' in group.content.decode()
    assert not Task.objects.exists() and not TaskGroup.objects.exists()
