"""A GPU type is normalised once, where a request names it (docs/scheduling.md, Tasks and their lifecycle): any case
is accepted and stored lower case, so the scheduler compares stored types as they are."""

import random
from decimal import Decimal

import pytest
from django.core.management import call_command
from rest_framework import serializers

from nodes.agent.agent import GPU_TYPE_LABEL
from nodes.gpu_type_input import GpuTypeField
from nodes.models import GPU, Node
from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.models import Task, TaskGroup
from tenants.models import TenantGpuQuota
from tests.factories import make_node
from tests.nodes.conftest import card, heartbeat_body

pytestmark = pytest.mark.django_db

HEARTBEAT = "/api/v1/agent/heartbeat"


class _Typed(serializers.Serializer):
    gpu_type = GpuTypeField(required=False, allow_blank=True, default="")


@pytest.mark.parametrize("given,stored", [("NVIDIA", "nvidia"), (" Ascend ", "ascend"), ("musa", "musa"), ("", "")])
def test_the_field_stores_any_case_lower_case(given, stored):
    typed = _Typed(data={"gpu_type": given})
    assert typed.is_valid(), typed.errors
    assert typed.validated_data["gpu_type"] == stored


@pytest.mark.parametrize("given", ["TPU", 7, ["nvidia"]])
def test_the_field_refuses_what_is_no_type_in_any_case(given):
    typed = _Typed(data={"gpu_type": given})
    assert not typed.is_valid()
    assert "gpu_type" in typed.errors


@pytest.mark.parametrize("spelled", ["NVIDIA", "nvidia", " Nvidia "])
def test_a_task_submitted_in_any_case_is_stored_lower_case_and_placed_as_before(tenant_client, spelled):
    nvidia = make_node(gpu_type="nvidia", cards=4)
    make_node(gpu_type="ascend", cards=8)
    response = tenant_client.post("/api/v1/tasks", {"name": "t", "gpu_type": spelled, "gpu_required": 2},
                                  format="json")
    assert response.status_code == 201, response.data
    assert response.data["gpu_type"] == "nvidia"

    run_cycle(rng=random.Random(1))
    task = Task.objects.get()
    assert (task.gpu_type, task.status, task.node_id, task.card_type, len(task.gpus)) == (
        "nvidia", lifecycle.SCHEDULED, nvidia.id, "nvidia", 2)


def test_an_unknown_type_in_upper_case_is_a_400_naming_the_field(tenant_client):
    response = tenant_client.post("/api/v1/tasks", {"name": "t", "gpu_type": "TPU", "gpu_required": 1},
                                  format="json")
    assert response.status_code == 400
    assert "gpu_type" in response.data["errors"]
    assert not Task.objects.exists()


def test_a_group_submitted_as_Ascend_stores_ascend_for_it_and_its_members(tenant_client):
    response = tenant_client.post("/api/v1/task-groups", {"name": "g", "type": "training", "world_size": 2,
                                                          "gpus_per_worker": 1, "gpu_type": "Ascend"}, format="json")
    assert response.status_code == 201, response.data
    assert TaskGroup.objects.get().gpu_type == "ascend"
    assert set(Task.objects.values_list("gpu_type", flat=True)) == {"ascend"}


def test_the_task_form_stores_the_type_lower_case(tenant_web):
    response = tenant_web.post("/tasks/new/", {"name": "train", "type": "batch", "gpu_type": "NVIDIA",
                                               "gpu_required": "1"})
    assert response.status_code == 302
    assert Task.objects.get().gpu_type == "nvidia"


def test_an_agent_reporting_Ascend_cards_stores_ascend(agent, registered):
    cards = [card(index, type="Ascend", model="Ascend910B") for index in range(2)]
    response = agent.post(HEARTBEAT, heartbeat_body(gpus=cards, labels={GPU_TYPE_LABEL: "Ascend"}), format="json")
    assert response.status_code == 200, response.content
    assert set(GPU.objects.filter(node=registered[0]).values_list("type", flat=True)) == {"ascend"}
    node = Node.objects.get(id=registered[0].id)
    assert (node.gpu_type, node.labels[GPU_TYPE_LABEL]) == ("ascend", "ascend")


def test_one_card_reported_under_two_spellings_is_a_400_naming_it(agent, registered):
    cards = [card(0, type="nvidia"), card(0, type="NVIDIA", uuid="GPU-other")]
    response = agent.post(HEARTBEAT, heartbeat_body(gpus=cards), format="json")
    assert response.status_code == 400
    assert "reported twice" in str(response.json())
    assert not GPU.objects.filter(node=registered[0]).exists()


def test_quotas_store_the_type_lower_case_and_two_spellings_of_one_type_are_refused(admin_client, tenant):
    url = f"/api/v1/tenants/{tenant.id}/quotas"
    stored = admin_client.put(url, [{"gpu_type": "NVIDIA", "nominal": 2}], format="json")
    assert stored.status_code == 200, stored.content
    assert list(TenantGpuQuota.objects.values_list("gpu_type", "nominal")) == [("nvidia", Decimal("2.00"))]

    twice = admin_client.put(url, [{"gpu_type": "NVIDIA", "nominal": 1}, {"gpu_type": "nvidia", "nominal": 3}],
                             format="json")
    assert twice.status_code == 403
    assert "listed twice" in str(twice.json())
    assert list(TenantGpuQuota.objects.values_list("gpu_type", "nominal")) == [("nvidia", Decimal("2.00"))]


def test_the_admin_quota_form_stores_the_type_lower_case(admin_web, tenant):
    response = admin_web.post("/admin/tenants/tenantgpuquota/add/", {"tenant": tenant.id, "gpu_type": "Ascend",
                                                                      "nominal": "1"})
    assert response.status_code == 302
    assert TenantGpuQuota.objects.get().gpu_type == "ascend"


def test_an_admin_releases_a_card_named_in_any_case(agent, registered, admin_client):
    node = registered[0]
    failed = {"code": "xid-48", "message": "Xid 48", "at": None}
    cards = [card(0), card(1, health="failed", errors=[failed])]
    assert agent.post(HEARTBEAT, heartbeat_body(gpus=cards), format="json").status_code == 200
    assert agent.post(HEARTBEAT, heartbeat_body(gpus=[card(0), card(1)]), format="json").status_code == 200

    response = admin_client.post(f"/api/v1/nodes/{node.id}/cards/NVIDIA/1/release")
    assert response.status_code == 200, response.content
    assert (response.json()["type"], response.json()["quarantined"]) == ("nvidia", False)


def test_card_fault_takes_the_type_in_any_case(tmp_path, capsys):
    make_node(name="mixed", gpu_type="nvidia", cards=1)
    GPU.objects.create(node=Node.objects.get(name="mixed"), index=0, uuid="npu-0", type="ascend", model="910B")
    call_command("card_fault", "mixed", "0", "--type", "ASCEND", "--state-dir", str(tmp_path))
    assert "mixed ascend0: fails" in capsys.readouterr().out
