"""Limits of input (design §15.8, issue 13 item 1): beyond them a 400 naming the field, nothing written, never a 500;
and the OpenAPI schema declares the same limits."""

import json

import pytest
from django.test import Client

from nodes.models import GPU, Node
from scheduling.models import Task, TaskGroup
from tenants.models import Tenant
from tests.factories import make_node
from tests.nodes.conftest import agent, card, heartbeat_body, registered  # noqa: F401 (fixtures)

TASK = {"name": "resnet", "type": "batch", "gpu_type": "nvidia", "gpu_required": 1}
GROUP = {"name": "serve", "type": "inference", "world_size": 1, "gpus_per_worker": 1}
WINDOW = {"start": "08:00", "end": "20:00", "action": "scale", "scale_to": 1}


def _refused(response, field: str) -> None:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] and body["message"]
    assert any(name == field or name.startswith((f"{field}.", f"{field}[")) for name in body["errors"]), body


@pytest.mark.django_db
@pytest.mark.parametrize("field,value", [
    ("name", "n" * 101),
    ("name", "evil\nname"),
    ("image", "--privileged"),
    ("image", "-v/:/host"),
    ("image", "ubuntu:22.04 --privileged"),
    ("image", "registry.example.com/x\x00"),
    ("command", "x" * (64 * 1024 + 1)),
    ("command", "é" * (40 * 1024)),  # 40 Ki characters, 80 KiB of UTF-8
    ("labels", {f"k{i}": "v" for i in range(65)}),
    ("labels", {"k" * 64: "v"}),
    ("labels", {"rack": "v" * 257}),
    ("labels", {"rack": "a\x1bb"}),
    ("labels", {"rdma-speed": "nan"}),
    ("labels", {"rdma-speed": "inf"}),
    ("cpu_cores", "nan"),
    ("gpu_required", 10**30),
    ("group", 10**30),
])
def test_task_submissions_beyond_the_limits_are_400s_naming_the_field(tenant_client, field, value):
    _refused(tenant_client.post("/api/v1/tasks", {**TASK, field: value}, format="json"), field)
    assert not Task.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("image", ["", "ubuntu", "ubuntu:22.04", "nvcr.io/nvidia/pytorch:24.01-py3",
                                   "localhost:5000/team/train@sha256:" + "a" * 64, "registry-1.example.com/a/b_c"])
def test_valid_oci_references_are_accepted(tenant_client, image):
    response = tenant_client.post("/api/v1/tasks", {**TASK, "image": image, "labels": {"rdma-speed": "200"}},
                                  format="json")
    assert response.status_code == 201, response.content


@pytest.mark.django_db
def test_a_privileged_flag_as_image_is_a_400_through_the_job_form_too(tenant_client):
    web = Client()
    web.force_login(tenant_client.user)
    response = web.post("/tasks/new/", {"name": "x", "type": "batch", "image": "--privileged", "gpu_required": "0"})
    assert response.status_code == 400
    assert not Task.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("body,field", [
    ({**GROUP, "window": {**WINDOW, "scale_to": 10**6}}, "window.scale_to"),
    ({**GROUP, "window": {**WINDOW, "scale_to": 2**31}}, "window.scale_to"),
    ({**GROUP, "replicas": 1025}, "replicas"),
    ({**GROUP, "type": "training", "world_size": 4097}, "world_size"),
    ({**GROUP, "name": "g" * 101}, "name"),
    ({**GROUP, "image": "--privileged"}, "image"),
])
def test_group_submissions_beyond_the_limits_are_400s(tenant_client, body, field):
    _refused(tenant_client.post("/api/v1/task-groups", body, format="json"), field)
    assert not TaskGroup.objects.exists() and not Task.objects.exists()


@pytest.mark.django_db
def test_an_inference_group_of_more_replicas_than_allowed_is_refused_by_a_rule(tenant_client):
    """world_size is the replica count of an inference group without `replicas`: a rule across fields (403), where the
    schema's own bound on world_size (4096, a training gang's) allows the request."""
    response = tenant_client.post("/api/v1/task-groups", {**GROUP, "world_size": 2000}, format="json")

    assert (response.status_code, response.json()["field"]) == (403, "world_size")
    assert not TaskGroup.objects.exists()


@pytest.mark.django_db
def test_the_longest_group_name_still_fits_its_members_names(tenant_client):
    response = tenant_client.post("/api/v1/task-groups", {**GROUP, "name": "g" * 100, "replicas": 1024},
                                  format="json")
    assert response.status_code == 201, response.content
    assert max(len(name) for name in Task.objects.values_list("name", flat=True)) <= 200


@pytest.mark.django_db
@pytest.mark.parametrize("gpu_quota", [1415565775122249601520133734400, 1_000_001, 2**31])
def test_an_oversized_gpu_quota_is_a_400_on_create_and_patch(admin_client, tenant, gpu_quota):
    _refused(admin_client.post("/api/v1/tenants", {"name": "x", "gpu_quota": gpu_quota}, format="json"), "gpu_quota")
    _refused(admin_client.patch(f"/api/v1/tenants/{tenant.id}", {"gpu_quota": gpu_quota}, format="json"), "gpu_quota")
    assert not Tenant.objects.filter(name="x").exists()
    tenant.refresh_from_db()
    assert tenant.gpu_quota is None


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["cpu_cores", "memory_gb"])
def test_registration_numbers_fit_their_columns(admin_client, field):
    body = {"name": "n1", "internal_ip": "10.0.0.1/24", "cpu_cores": 8, "memory_gb": 64, field: 2**31}
    _refused(admin_client.post("/api/v1/agent/register", body, format="json"), field)
    _refused(admin_client.post("/api/v1/agent/register", {**body, field: 1, "name": "n" * 101}, format="json"), "name")
    assert not Node.objects.exists()


@pytest.mark.django_db
def test_a_heartbeat_numa_beyond_its_column_is_a_400(agent, registered):
    body = heartbeat_body(cards=2, gpus=[card(0), card(1, numa=2**31)])
    _refused(agent.post("/api/v1/agent/heartbeat", body, format="json"), "gpus[1].numa")
    assert not GPU.objects.filter(node=registered[0]).exists()


@pytest.mark.django_db
def test_the_agents_own_topology_label_may_be_longer_than_other_labels(agent, registered):
    long_topology = "nv=" + ",".join(f"{a}-{b}" for a in range(16) for b in range(a + 1, 16)) + ";numa=0:0"
    assert len(long_topology) > 256
    assert agent.post("/api/v1/agent/heartbeat", heartbeat_body(labels={"heteroflow.io/gpu-topology": long_topology}),
                      format="json").status_code == 200
    _refused(agent.post("/api/v1/agent/heartbeat", heartbeat_body(labels={"rack": long_topology}), format="json"),
             "labels")


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["?node=²", "?node=٣", "?tenant=²", f"?node={10**30}"])
def test_odd_digits_in_the_task_list_filter_are_not_500s(admin_client, query):
    response = admin_client.get(f"/api/v1/tasks{query}")
    assert response.status_code in (200, 400)


@pytest.mark.django_db
@pytest.mark.parametrize("limit", ["²", "٣", "1" * 30])
def test_odd_digits_in_the_plugin_history_limit_are_a_400(admin_client, limit):
    _refused(admin_client.get(f"/api/v1/plugins/history?limit={limit}"), "limit")


@pytest.mark.django_db
def test_odd_digits_on_pages_are_not_500s(admin_user):
    web = Client()
    web.force_login(admin_user)
    node = make_node()
    assert web.get("/tasks/?tenant=²").status_code == 200
    response = web.post(f"/nodes/{node.id}/", {"form": "settings", "dedicated_tenant": "²"})
    assert response.status_code in (200, 400)
    assert web.post("/plugins/", {"op": "weight", "name": "spread", "weight": "²"}).status_code in (200, 400)


@pytest.mark.django_db
def test_a_non_ascii_metrics_token_is_refused_not_a_500(settings):
    settings.HETEROFLOW_METRICS_TOKEN = "scrape-secret"
    response = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer тайна")
    assert response.status_code == 403


def test_the_schema_declares_the_limits():
    from drf_spectacular.generators import SchemaGenerator

    schema = json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))
    components = schema["components"]["schemas"]
    task = components["TaskInput"]["properties"]
    assert task["name"]["maxLength"] == 100 and "pattern" in task["name"]
    image = task["image"]["oneOf"][0]  # or blank
    assert image["pattern"].startswith("^") and image["maxLength"] == 255
    assert task["command"]["maxLength"] == 64 * 1024
    assert task["labels"]["maxProperties"] == 64
    assert task["labels"]["additionalProperties"]["maxLength"] == 256
    group = components["TaskGroupInput"]["properties"]
    assert group["replicas"]["maximum"] == 1024 and group["world_size"]["maximum"] == 4096
    assert components["ScheduleWindowInput"]["properties"]["scale_to"]["maximum"] == 1024
    assert components["TenantListCreateApiInput"]["properties"]["gpu_quota"]["maximum"] == 1_000_000
