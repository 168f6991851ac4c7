"""design §17.2: the autoscaler ticker — metric reports from the agents' heartbeats, HPA's rule applied to the group,
each decision on the group's timeline with its figures, the seed's rules (a window holding the group stops it; an
inactive tenant is never scaled up; the tenant's ceiling and pending cap hold for new replicas, refused on the
timeline), the leader lock, the replica gauge and the 400s of a bad `autoscale`."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from nodes.services import agent_register
from scheduling import lifecycle
from scheduling.groups.autoscale import AUTOSCALE_LOCK_KEY, autoscale_groups
from scheduling.groups.services import task_group_create
from scheduling.models import GroupEvent, GroupMetricSample, Task, TaskGroup
from scheduling.services.task_transition import task_transition
from tests.factories import make_node
from tests.nodes.conftest import heartbeat_body, node_client

pytestmark = pytest.mark.django_db

SPEC = {"min": 1, "max": 6, "metric": "requests_per_second", "target": 10.0, "scale_down_delay_seconds": 300}


def _service(tenant, node, replicas=2, **fields):
    group = task_group_create(tenant=tenant, name="svc", type="inference", world_size=1, gpus_per_worker=1,
                              image="vllm:1", replicas=replicas, autoscale=dict(SPEC), **fields)
    for index, task in enumerate(group.members.order_by("rank")):
        task_transition(task.id, "pending", "scheduled", node=node, gpus=[index])
        task_transition(task.id, "scheduled", "running")
    return group


def _load(group, per_replica, at=None):
    group.members.filter(status=lifecycle.RUNNING).update(metric_value=per_replica, metric_at=at or timezone.now())


def test_heartbeat_reports_land_on_the_autoscaled_replicas_running_on_that_node(tenant):
    node, token = agent_register(name="gpu-a", internal_ip="10.0.3.7/24", public_ip=None, cpu_cores=64,
                                 memory_gb=512)
    other = make_node(cards=4)
    group = _service(tenant, node)
    mine, elsewhere = group.members.order_by("rank")
    Task.objects.filter(id=elsewhere.id).update(node=other)

    reply = node_client(token).post("/api/v1/agent/heartbeat", heartbeat_body(
        metrics=[{"task": mine.id, "value": 12.5}, {"task": elsewhere.id, "value": 99}]), format="json")

    assert reply.status_code == 200, reply.content
    assert Task.objects.get(id=mine.id).metric_value == 12.5
    assert Task.objects.get(id=elsewhere.id).metric_value is None


def test_a_busy_group_scales_up_at_once_with_its_figures_on_the_timeline_and_the_gauge(tenant, admin_user):
    group = _service(tenant, make_node(cards=8))
    _load(group, 25)  # Σ 50 ÷ 10 = 5

    assert autoscale_groups().scaled == (group.id,)

    group.refresh_from_db()
    assert group.replicas == 5 and group.members.filter(status=lifecycle.PENDING).count() == 3
    event = GroupEvent.objects.get(group=group, kind="autoscale")
    assert event.figures == {"from": 2, "to": 5, "sum": 50.0, "target": 10.0, "metric": "requests_per_second",
                             "reporting": 2, "ready": 2}
    assert "2 → 5" in event.message
    sample = GroupMetricSample.objects.get(group=group)
    assert (sample.desired, sample.ready, sample.value, sample.proposed) == (5, 2, 50.0, 5)
    client = Client()
    client.force_login(admin_user)
    metrics = client.get("/metrics").content.decode()
    assert 'heteroflow_group_replicas{group="svc",kind="desired"} 5.0' in metrics
    assert 'heteroflow_group_replicas{group="svc",kind="ready"} 2.0' in metrics


def test_a_quiet_group_scales_down_only_after_the_delay(tenant):
    group = _service(tenant, make_node(cards=8), replicas=4)
    start = timezone.now()
    for seconds in range(0, 300, 15):
        _load(group, 1, at=start + timedelta(seconds=seconds))
        autoscale_groups(now=start + timedelta(seconds=seconds))
        assert TaskGroup.objects.get(id=group.id).replicas == 4
    _load(group, 1, at=start + timedelta(seconds=300))
    autoscale_groups(now=start + timedelta(seconds=300))
    assert TaskGroup.objects.get(id=group.id).replicas == 1
    assert group.members.filter(status=lifecycle.STOPPING).count() == 3


def test_a_window_holding_the_group_stops_the_autoscaler(tenant):
    group = _service(tenant, make_node(cards=8))
    TaskGroup.objects.filter(id=group.id).update(window_applied="scale")
    _load(group, 50)

    assert autoscale_groups().scaled == ()
    autoscale_groups()

    assert TaskGroup.objects.get(id=group.id).replicas == 2
    assert not group.members.filter(status=lifecycle.PENDING).exists()
    skipped = GroupEvent.objects.filter(group=group, kind="autoscale")
    assert [event.message for event in skipped] == ["autoscaler skips the group: its window holds it at scale"]


def test_an_inactive_tenant_is_never_scaled_up_and_the_refusal_shows(tenant):
    group = _service(tenant, make_node(cards=8))
    tenant.status = "inactive"
    tenant.save()
    _load(group, 50)

    autoscale_groups()

    assert TaskGroup.objects.get(id=group.id).replicas == 2
    assert group.members.count() == 2
    refusal = GroupEvent.objects.get(group=group, kind="refused")
    assert "inactive" in refusal.message and refusal.figures["to"] == 6


def test_the_priority_ceiling_holds_for_new_replicas(tenant):
    group = _service(tenant, make_node(cards=8))
    group.members.update(priority=80)
    tenant.max_priority = 60
    tenant.save()
    _load(group, 30)

    autoscale_groups()

    assert TaskGroup.objects.get(id=group.id).replicas == 2
    assert "max_priority" in GroupEvent.objects.get(group=group, kind="refused").message


def test_a_stale_report_is_not_counted(tenant):
    group = _service(tenant, make_node(cards=8))
    group.members.update(metric_value=50, metric_at=timezone.now() - timedelta(minutes=5))
    autoscale_groups()
    assert TaskGroup.objects.get(id=group.id).replicas == 2


def test_one_autoscaler_at_a_time(tenant):
    group = _service(tenant, make_node(cards=8))
    _load(group, 50)
    held, release = threading.Event(), threading.Event()

    def leader():
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [AUTOSCALE_LOCK_KEY])
            held.set()
            release.wait(10)
        connection.close()

    thread = threading.Thread(target=leader)
    thread.start()
    try:
        assert held.wait(10)
        assert autoscale_groups().leader is False
    finally:
        release.set()
        thread.join()
    assert TaskGroup.objects.get(id=group.id).replicas == 2


@pytest.mark.parametrize(("autoscale", "field"), [
    ({**SPEC, "min": 5, "max": 2}, "autoscale.min"),
    ({**SPEC, "target": 0}, "autoscale.target"),
    ({**SPEC, "target": -1}, "autoscale.target"),
    ({**SPEC, "metric": "latency"}, "autoscale.metric"),
])
def test_a_bad_autoscale_is_a_400_naming_the_field(tenant_client, autoscale, field):
    body = {"name": "svc", "type": "inference", "world_size": 1, "gpus_per_worker": 1, "image": "vllm:1",
            "command": "serve", "replicas": 2, "autoscale": autoscale}
    response = tenant_client.post("/api/v1/task-groups", body, format="json")
    assert response.status_code == 400 and response.json()["field"] == field, response.content
    assert not TaskGroup.objects.exists()


def test_autoscale_on_a_training_group_is_a_400(tenant_client):
    body = {"name": "train", "type": "training", "world_size": 2, "gpus_per_worker": 1, "image": "torch:1",
            "command": "train", "autoscale": SPEC}
    response = tenant_client.post("/api/v1/task-groups", body, format="json")
    assert response.status_code == 400 and response.json()["field"] == "autoscale", response.content
    assert not TaskGroup.objects.exists()


def test_a_group_starts_within_its_bounds(tenant_client):
    body = {"name": "svc", "type": "inference", "world_size": 1, "gpus_per_worker": 1, "image": "vllm:1",
            "command": "serve", "replicas": 9, "autoscale": SPEC}
    response = tenant_client.post("/api/v1/task-groups", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["replicas"] == 6 and len(response.json()["members"]) == 6
    assert response.json()["autoscale"]["scale_down_delay_seconds"] == 300


def test_a_manual_scale_of_an_autoscaled_group_stays_within_its_bounds(tenant_client, tenant):
    group = _service(tenant, make_node(cards=8))
    refused = tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"replicas": 7}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "replicas", refused.content
    assert TaskGroup.objects.get(id=group.id).replicas == 2
    accepted = tenant_client.patch(f"/api/v1/task-groups/{group.id}", {"replicas": 3}, format="json")
    assert accepted.status_code == 200 and accepted.json()["replicas"] == 3
