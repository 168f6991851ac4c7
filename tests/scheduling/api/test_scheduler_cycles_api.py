import pytest

from scheduling import lifecycle
from scheduling.models import CycleRecord, Task
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db

URL = "/api/v1/scheduler/cycles"


def test_an_admin_runs_one_cycle_and_gets_its_figures(admin_client, tenant):
    make_node(cards=2)
    placed = [make_task(tenant=tenant, gpu_required=1) for _ in range(2)]
    too_big = make_task(tenant=tenant, gpu_required=4)

    response = admin_client.post(URL)

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"considered", "bound", "failed", "preempting", "duration_ms"}
    assert (body["considered"], body["bound"], body["failed"], body["preempting"]) == (3, 2, 1, 0)
    assert body["duration_ms"] > 0
    assert Task.objects.filter(id__in=[t.id for t in placed], status=lifecycle.SCHEDULED).count() == 2
    assert Task.objects.get(id=too_big.id).status == lifecycle.PENDING
    assert CycleRecord.objects.count() == 1


def test_a_tenant_may_not_run_a_cycle(tenant_client, tenant):
    task = make_task(tenant=tenant, gpu_required=1)
    make_node(cards=1)

    response = tenant_client.post(URL)

    assert response.status_code == 403
    assert Task.objects.get(id=task.id).status == lifecycle.PENDING


def test_an_anonymous_caller_may_not_run_a_cycle(client):
    assert client.post(URL).status_code in (401, 403)
