"""Leaks between tenants (design §15.6, issue 13 item 8): a tenant's diagnostics and preemption messages name none of
another tenant's task ids, priorities or dedicated nodes; node addresses are for staff."""

import re

import pytest

from nodes.models import Node
from scheduling.cycle.run import run_cycle
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.models import Task, TaskEvent
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, task_info_from_row
from tests.factories import make_node, make_task
from tests.scheduling.bind.single import bind_task
from tests.scheduling.preemption.conftest import placed_task, running_stage  # noqa: F401 (fixtures)


@pytest.fixture
def cross_tenant_preemption(tenant, other_tenant, running_stage):  # noqa: F811
    node = make_node(cards=4, name="shared-node")
    victim = placed_task(tenant=other_tenant, node=node, gpus=[0, 1, 2, 3], priority=17)
    preemptor = make_task(tenant=tenant, priority=93, gpu_required=4, preemptible=True)
    assert run_cycle().preempting == 1
    return victim, preemptor


def test_the_preemptors_tenant_reads_a_count_not_the_victims_id_or_priority(cross_tenant_preemption,
                                                                            tenant_client, admin_client):
    victim, preemptor = cross_tenant_preemption
    diagnostics = tenant_client.get(f"/api/v1/tasks/{preemptor.id}").json()["diagnostics"]
    text = str(diagnostics)
    assert not re.search(rf"\b{victim.id}\b", text) and not re.search(r"\bpriority 17\b", text)
    assert "1 task of other tenants" in diagnostics["message"]
    assert diagnostics["preemption"]["victims"] == [] and diagnostics["preemption"]["victims_of_other_tenants"] == 1
    assert admin_client.get(f"/api/v1/tasks/{preemptor.id}").json()["diagnostics"]["preemption"]["victims"] == [
        victim.id], "admins see everything"


def test_the_victims_tenant_is_not_told_who_preempted_it(cross_tenant_preemption, other_tenant_client):
    victim, preemptor = cross_tenant_preemption
    diagnostics = other_tenant_client.get(f"/api/v1/tasks/{victim.id}").json()["diagnostics"]
    assert "preempted_by" not in diagnostics
    assert not re.search(rf"\b({preemptor.id}|93)\b", str(diagnostics))
    event = TaskEvent.objects.get(task_id=victim.id, to_status="preempting")
    assert "another tenant" in event.reason and not re.search(rf"\b{preemptor.id}\b", event.reason)


@pytest.mark.django_db
def test_nodes_dedicated_to_other_tenants_are_counted_not_named(tenant, other_tenant, tenant_client, tenant_web):
    make_node(cards=0, name="secret-dedicated-node", dedicated_tenant=other_tenant)
    task = make_task(tenant=tenant, gpu_required=1)
    run_cycle()
    diagnostics = tenant_client.get(f"/api/v1/tasks/{task.id}").json()["diagnostics"]
    assert "secret-dedicated-node" not in str(diagnostics)
    assert diagnostics["nodes_not_shown"] == {"dedicated to another tenant": 1}
    page = tenant_web.get(f"/tasks/{task.id}/")
    assert page.status_code == 200 and b"secret-dedicated-node" not in page.content


@pytest.mark.django_db
def test_node_addresses_are_for_staff_only(tenant_client, admin_client):
    node = make_node(internal_ip="10.9.8.7/24", public_ip="203.0.113.99")
    listed = tenant_client.get("/api/v1/nodes").json()
    assert listed and all(row["internal_ip"] is None and row["public_ip"] is None for row in listed)
    assert tenant_client.get(f"/api/v1/nodes/{node.id}").json()["internal_ip"] is None
    assert admin_client.get(f"/api/v1/nodes/{node.id}").json()["internal_ip"] == "10.9.8.7/24"
    assert admin_client.get("/api/v1/nodes").json()[0]["public_ip"] == "203.0.113.99"


@pytest.mark.django_db
def test_nodes_another_tenant_holds_alone_are_counted_not_named(tenant, other_tenant, tenant_client):
    """design §16.5: which Hygon, MetaX or Biren node another tenant holds is not a tenant's to read."""
    held = make_node(gpu_type="hygon", model="K100", cards=2, name="secret-held-node")
    make_task(tenant=other_tenant, status="running", node=held, gpus=[0], gpu_required=1)
    task = make_task(tenant=tenant, gpu_required=1)
    run_cycle()
    diagnostics = tenant_client.get(f"/api/v1/tasks/{task.id}").json()["diagnostics"]
    assert "secret-held-node" not in str(diagnostics)
    assert diagnostics["nodes_not_shown"] == {"SingleTenantRuntime": 1}


@pytest.mark.django_db
def test_binds_refusal_of_a_node_dedicated_to_another_tenant_does_not_name_it(tenant, other_tenant):
    """issue 27 item 5: bind's refusal, which reaches the tenant, named the dedicated node."""
    node = make_node(cards=2, name="secret-dedicated-node")
    stale = build_snapshot().node(node.id)
    Node.objects.filter(id=node.id).update(dedicated_tenant=other_tenant)
    task = make_task(tenant=tenant, gpu_required=1)
    row = Task.objects.filter(id=task.id).values_list(*TASK_INFO_FIELDS).get()
    outcome = bind_task(task_info_from_row(row), stale, [0], config=SchedulerConfig())
    assert outcome.code == "NoSchedulableNodes"
    assert "dedicated to another tenant" in outcome.message and "secret-dedicated-node" not in outcome.message

