"""The task group form and page (design §15.5: `max_restarts` on the form; the group's derived status)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from scheduling.groups.services import task_group_create
from scheduling.models import TaskGroup
from tests.factories import make_task
from tests.web_clients import HTMX

pytestmark = pytest.mark.django_db

GANG = {"name": "llm", "type": "training", "world_size": "2", "gpus_per_worker": "1", "parallelism": "data",
        "max_restarts": "5"}


def test_the_form_creates_a_group_with_its_restart_budget_and_shows_it(tenant_web, tenant):
    response = tenant_web.post("/groups/new/", GANG)

    group = TaskGroup.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/groups/{group.id}/"
    assert (group.tenant_id, group.max_restarts, group.members.count()) == (tenant.id, 5, 2)
    page = tenant_web.get(response["Location"]).content.decode()
    assert 'id="group-status">pending' in page and "0 / 5" in page and "llm-1" in page


def test_the_restart_budget_defaults_to_three(tenant_web):
    tenant_web.post("/groups/new/", {**GANG, "max_restarts": ""})
    assert TaskGroup.objects.get().max_restarts == 3


def test_the_form_gives_the_group_and_its_members_a_timeout_and_grace(tenant_web):
    tenant_web.post("/groups/new/", {**GANG, "type": "inference", "parallelism": "", "timeout_seconds": "none",
                                     "termination_grace_seconds": "45"})

    group = TaskGroup.objects.get()
    assert (group.timeout_seconds, group.termination_grace_seconds) == (None, 45)
    assert set(group.members.values_list("timeout_seconds", "termination_grace_seconds")) == {(None, 45)}


def test_a_bad_restart_budget_is_refused_beside_the_field_and_creates_nothing(tenant_web):
    response = tenant_web.post("/groups/new/", {**GANG, "max_restarts": "-1"})

    assert response.status_code == 400
    assert 'data-field="max_restarts"' in response.content.decode()
    assert not TaskGroup.objects.exists()


def test_the_form_needs_its_csrf_token(tenant_web):
    guarded = Client(enforce_csrf_checks=True)
    guarded.force_login(tenant_web.user)
    assert guarded.post("/groups/new/", GANG).status_code == 403
    assert not TaskGroup.objects.exists()


def test_another_tenants_group_is_not_found_and_the_page_needs_a_login(tenant_web, other_tenant):
    theirs = task_group_create(tenant=other_tenant, name="theirs", type="training", world_size=2, gpus_per_worker=1)
    assert tenant_web.get(f"/groups/{theirs.id}/").status_code == 404
    assert Client().get(f"/groups/{theirs.id}/").status_code == 302


def test_the_page_serves_its_live_fragment_to_htmx(admin_web, tenant):
    group = task_group_create(tenant=tenant, name="llm", type="training", world_size=2, gpus_per_worker=1)
    fragment = admin_web.get(f"/groups/{group.id}/", **HTMX).content.decode()
    assert fragment.lstrip().startswith('<div id="group-live"')


def test_a_members_task_page_links_to_its_group(tenant_web, tenant):
    group = task_group_create(tenant=tenant, name="llm", type="training", world_size=2, gpus_per_worker=1)
    member = group.members.order_by("rank").first()
    page = tenant_web.get(f"/tasks/{member.id}/").content.decode()
    assert f'href="/groups/{group.id}/" id="task-group">llm</a>' in page


def test_an_inference_groups_page_shows_its_crash_loop_and_the_backoff(tenant, admin_web):
    """issue 27 item 7: the backoff of a failing replica is on the group's page."""
    group = TaskGroup.objects.create(tenant=tenant, name="svc", type="inference", replicas=1, gpus_per_worker=1)
    finished = timezone.now() - timedelta(seconds=2)
    make_task(tenant=tenant, group=group, rank=0, type="inference", gpu_required=1, status="failed",
              started_at=finished - timedelta(seconds=3), finished_at=finished)
    page = admin_web.get(f"/groups/{group.id}/").content.decode()
    assert 'id="group-crash-loop"' in page
    assert "the last 1 replica failed soon after starting" in page
    assert "backoff 10 s" in page



def test_the_form_creates_a_service_of_multi_node_replicas_and_its_page_shows_them_by_replica(tenant_web):
    response = tenant_web.post("/groups/new/", {**GANG, "type": "inference", "world_size": "1", "replicas": "2",
                                                "nodes_per_replica": "2"})

    group = TaskGroup.objects.get()
    assert response.status_code == 302 and group.nodes_per_replica == 2 and group.members.count() == 4
    page = tenant_web.get(response["Location"]).content.decode()
    assert 'id="group-replica-shape"' in page and "2 nodes × 1 GPU" in page
    assert "<th>Replica</th><th>Rank</th>" in page and "llm-1-1" in page


def test_nodes_per_replica_on_a_training_group_is_refused_beside_the_field(tenant_web):
    response = tenant_web.post("/groups/new/", {**GANG, "nodes_per_replica": "2"})

    assert response.status_code == 400
    assert 'data-field="nodes_per_replica"' in response.content.decode()
    assert not TaskGroup.objects.exists()
