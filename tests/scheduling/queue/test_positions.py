"""Queue positions (design §17.4): computed by the cycle in the order in force, per GPU type; read, never
computed, by the API, the task page and `hf describe`."""

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.models import Task, TaskGroup, UsageRecord
from scheduling.queue import positions
from scheduling.queue.positions import compute_queue_positions, queue_positions
from scheduling.queue import immediate_queue
from tenants.models import TenantGpuQuota
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_positions_left():
    immediate_queue.connection().delete(positions.POSITIONS_KEY)
    yield
    immediate_queue.connection().delete(positions.POSITIONS_KEY)


def _pending(tenant, *, gpu_type="nvidia", priority=50, minutes_ago=0, **fields) -> Task:
    task = make_task(tenant=tenant, gpu_type=gpu_type, gpu_required=8, priority=priority, **fields)
    Task.objects.filter(id=task.id).update(created_at=timezone.now() - timedelta(minutes=minutes_ago))
    return task


def test_positions_follow_priority_then_creation_within_each_gpu_type(tenant):
    old = _pending(tenant, minutes_ago=30)
    new = _pending(tenant, minutes_ago=10)
    urgent = _pending(tenant, priority=90, minutes_ago=1)
    ascend = _pending(tenant, gpu_type="ascend", minutes_ago=5)
    anything = _pending(tenant, gpu_type="")
    gang = TaskGroup.objects.create(tenant=tenant, name="g", type="training", world_size=2, gpus_per_worker=8,
                                    gpu_type="nvidia")
    members = [_pending(tenant, group=gang, rank=rank, minutes_ago=20) for rank in range(2)]
    TaskGroup.objects.filter(id=gang.id).update(created_at=timezone.now() - timedelta(minutes=20))

    found = compute_queue_positions(order="priority")

    assert found == {urgent.id: (1, 4), old.id: (2, 4), members[0].id: (3, 4), members[1].id: (3, 4),
                     new.id: (4, 4), ascend.id: (1, 1), anything.id: (1, 1)}


def test_under_fair_share_the_lower_decayed_share_comes_first(tenant, other_tenant):
    for owner in (tenant, other_tenant):
        TenantGpuQuota.objects.create(tenant=owner, gpu_type="nvidia", nominal=8)
    UsageRecord.objects.create(tenant=tenant, day=timezone.now().date(), gpu_type="nvidia", task_type="batch",
                               card_seconds=8 * 3600)
    older = _pending(tenant, minutes_ago=30)
    newer = _pending(other_tenant, minutes_ago=1)

    assert compute_queue_positions(order="priority") == {older.id: (1, 2), newer.id: (2, 2)}
    assert compute_queue_positions(order="fair-share") == {newer.id: (1, 2), older.id: (2, 2)}


def test_a_cycle_publishes_them_and_the_api_and_the_task_page_read_them(tenant, tenant_client, tenant_web):
    make_node(cards=8)
    first = _pending(tenant, minutes_ago=3)
    second = _pending(tenant, minutes_ago=2)
    third = _pending(tenant, minutes_ago=1)
    assert tenant_client.get(f"/api/v1/tasks/{third.id}").json()["queue_position"] is None

    run_cycle(rng=random.Random(1))

    assert Task.objects.get(id=first.id).status == lifecycle.SCHEDULED
    assert tenant_client.get(f"/api/v1/tasks/{first.id}").json()["queue_position"] is None
    assert tenant_client.get(f"/api/v1/tasks/{third.id}").json()["queue_position"] == 2
    listed = {task["id"]: task["queue_position"] for task in tenant_client.get("/api/v1/tasks").json()}
    assert listed == {first.id: None, second.id: 1, third.id: 2}
    full = {task["id"]: task["queue_position"]
            for task in tenant_client.get("/api/v1/tasks", {"diagnostics": "full"}).json()}
    assert full == listed
    page = tenant_web.get(f"/tasks/{third.id}/").content.decode()
    assert "Queue position <strong>2</strong> of 2" in page


def test_a_request_does_not_order_the_queue(tenant, tenant_client, monkeypatch):
    task = _pending(tenant)
    monkeypatch.setattr(positions, "compute_queue_positions", lambda **kwargs: pytest.fail("computed per request"))

    assert tenant_client.get(f"/api/v1/tasks/{task.id}").json()["queue_position"] is None
    assert queue_positions([task.id]) == {}


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_short_queue_is_published_every_cycle():
    clock = _Clock()
    pace = positions.PublicationPace(clock)
    pace.published(tasks=positions.EVERY_CYCLE_UP_TO, seconds=2.0)
    assert pace.due()


def test_a_long_queue_is_published_once_its_last_publication_is_pacing_times_its_cost_old():
    clock = _Clock()
    pace = positions.PublicationPace(clock)
    assert pace.due()
    pace.published(tasks=positions.EVERY_CYCLE_UP_TO + 1, seconds=0.5)
    clock.now += positions.PACING * 0.5 - 0.01
    assert not pace.due()
    clock.now += 0.02
    assert pace.due()


def test_the_cycle_skips_publishing_until_the_pace_says_so(tenant, monkeypatch):
    from scheduling.cycle import run

    make_node(gpu_type="nvidia", cards=8)
    clock = _Clock()
    monkeypatch.setattr(run, "_positions_pace", positions.PublicationPace(clock))
    run._positions_pace.published(tasks=positions.EVERY_CYCLE_UP_TO + 1, seconds=1.0)
    waiting = [_pending(tenant, minutes_ago=minutes) for minutes in (3, 2, 1)]

    run_cycle(instance="test", rng=random.Random(0))
    assert queue_positions([task.id for task in waiting]) == {}

    # The oldest took the node; the two left wait parked, and a new task gives the next cycle work.
    waiting.append(_pending(tenant))
    clock.now += positions.PACING
    run_cycle(instance="test", rng=random.Random(0))
    assert queue_positions([task.id for task in waiting]) == {waiting[1].id: (1, 3), waiting[2].id: (2, 3),
                                                              waiting[3].id: (3, 3)}
