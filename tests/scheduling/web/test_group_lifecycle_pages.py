"""design §17.2 on the group page: Stop (behind a confirmation), Scale and Update with errors beside the field,
revisions and endpoints in the live fragment."""

import pytest
from django.test import Client

from scheduling.groups.services import task_group_create
from scheduling.models import GroupRevision, TaskGroup
from scheduling.services.task_transition import task_transition
from tests.factories import make_node
from tests.web_clients import HTMX

pytestmark = pytest.mark.django_db


@pytest.fixture
def service(tenant):
    return task_group_create(tenant=tenant, name="chat", type="inference", world_size=1, gpus_per_worker=1,
                             replicas=2, image="vllm:1", command="serve", env={"MODEL": "a"})


def test_the_page_offers_scale_update_and_a_confirmed_stop(tenant_web, service):
    page = tenant_web.get(f"/groups/{service.id}/").content.decode()

    assert 'id="group-scale"' in page and 'id="group-update"' in page
    assert "<details" in page and "Yes, stop chat" in page
    assert "MODEL=a" in page and 'id="group-revisions"' in page and "No ready replica." in page


def test_stop_from_the_page_stops_the_group(tenant_web, service):
    response = tenant_web.post(f"/groups/{service.id}/", {"action": "stop"})

    assert response.status_code == 302
    service.refresh_from_db()
    assert service.stopped_at is not None and service.status == "stopped"
    page = tenant_web.get(f"/groups/{service.id}/").content.decode()
    assert 'id="group-scale"' not in page and "Yes, stop" not in page


def test_scale_from_the_page_and_its_error_beside_the_field(tenant_web, service):
    assert tenant_web.post(f"/groups/{service.id}/", {"action": "scale", "replicas": "3"}).status_code == 302
    assert TaskGroup.objects.get(id=service.id).replicas == 3

    refused = tenant_web.post(f"/groups/{service.id}/", {"action": "scale", "replicas": "-1"})

    assert refused.status_code == 400
    assert 'data-field="replicas"' in refused.content.decode()
    assert TaskGroup.objects.get(id=service.id).replicas == 3 and service.members.count() == 3


@pytest.mark.parametrize("form,field", [
    ({"image": "vllm:1", "command": "serve", "env": "MODEL=a"}, "image"),       # no change
    ({"image": "vllm:2", "command": "serve", "env": "MODEL"}, "env"),           # not NAME=value
    ({"image": "vllm:2", "command": "serve", "env": "RANK=3"}, "env"),          # the control plane's
    ({"image": "Not An Image!", "command": "serve", "env": ""}, "image"),
])
def test_update_errors_show_beside_their_field_and_nothing_is_rolled_out(tenant_web, service, form, field):
    response = tenant_web.post(f"/groups/{service.id}/", {"action": "update", **form})

    assert response.status_code == 400
    assert f'data-field="{field}"' in response.content.decode()
    assert GroupRevision.objects.filter(group=service).count() == 1


def test_update_from_the_page_rolls_out_a_revision_shown_live(tenant_web, service):
    response = tenant_web.post(f"/groups/{service.id}/", {"action": "update", "image": "vllm:2",
                                                          "command": "serve", "env": "MODEL=b\nTOKENS=4096"})

    assert response.status_code == 302
    revision = GroupRevision.objects.get(group=service, number=2)
    assert (revision.image, revision.env, revision.state) == ("vllm:2", {"MODEL": "b", "TOKENS": "4096"},
                                                              "rolling_out")
    fragment = tenant_web.get(f"/groups/{service.id}/", **HTMX).content.decode()
    assert fragment.lstrip().startswith('<div id="group-live"') and "rolling_out" in fragment


def test_ready_replicas_are_listed_as_endpoints_in_the_live_fragment(tenant_web, service):
    node = make_node(name="gpu-7")
    replica = service.members.order_by("rank").first()
    task_transition(replica.id, "pending", "scheduled", node=node, gpus=[0], port=8123)
    task_transition(replica.id, "scheduled", "running")

    fragment = tenant_web.get(f"/groups/{service.id}/", **HTMX).content.decode()

    assert "gpu-7" in fragment and ":8123</code>" in fragment and 'id="group-ready">1 / 2' in fragment


def test_the_lifecycle_forms_need_csrf_and_the_tenant(tenant_web, service, other_tenant):
    guarded = Client(enforce_csrf_checks=True)
    guarded.force_login(tenant_web.user)
    assert guarded.post(f"/groups/{service.id}/", {"action": "stop"}).status_code == 403
    theirs = task_group_create(tenant=other_tenant, name="theirs", type="inference", world_size=1,
                               gpus_per_worker=1, replicas=1)
    assert tenant_web.post(f"/groups/{theirs.id}/", {"action": "stop"}).status_code == 404
    assert TaskGroup.objects.get(id=service.id).stopped_at is None
    assert TaskGroup.objects.get(id=theirs.id).stopped_at is None
