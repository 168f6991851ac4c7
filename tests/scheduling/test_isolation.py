"""Fault isolation of the loops (issue 13 item 2): one bad row — a hostile or legacy group, a failing task — never
halts a loop for the other tenants."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from scheduling.housekeeping import loops
from scheduling.groups.replicas import rebuild_inference_groups
from scheduling.groups.services import task_group_create
from scheduling.groups.windows import apply_scheduling_windows
from scheduling.models import Task, TaskGroup
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task

UTC = ZoneInfo("UTC")
NIGHT = datetime(2026, 12, 2, 23, 0, tzinfo=UTC)  # outside 08:00–20:00
DAYTIME = {"start": "08:00", "end": "20:00", "timezone": "UTC"}


def _group(tenant, name, **fields):
    return task_group_create(tenant=tenant, name=name, type="inference", world_size=1, gpus_per_worker=1,
                             **{"replicas": 2, **fields})


def _live(group) -> int:
    return Task.objects.filter(group=group, status__in=["pending", "scheduled", "running"]).count()


@pytest.mark.django_db
@pytest.mark.parametrize("poison", [
    {"window": {**DAYTIME, "action": "scale", "scale_to": 2**31}},   # beyond the integer column
    {"window": {**DAYTIME, "action": "pause", "timezone": "Mars/Olympus"}},
])
def test_a_hostile_group_cannot_halt_the_windows_of_other_tenants(tenant, other_tenant, poison):
    hostile = _group(tenant, "hostile", window={**DAYTIME, "action": "pause"})
    TaskGroup.objects.filter(id=hostile.id).update(**poison)
    victim = _group(other_tenant, "innocent", window={**DAYTIME, "action": "pause"})

    run = apply_scheduling_windows(now=NIGHT)

    assert run.changed_groups == [victim.id]
    victim.refresh_from_db()
    assert victim.window_applied == "pause" and _live(victim) == 0
    hostile.refresh_from_db()
    assert hostile.window_applied == "" and _live(hostile) == 2, "the bad group's share rolled back whole"


@pytest.mark.django_db
def test_a_group_whose_members_cannot_be_written_does_not_stop_the_rebuild_of_others(tenant, other_tenant):
    legacy = _group(tenant, "legacy", replicas=1)
    TaskGroup.objects.filter(id=legacy.id).update(name="g" * 199, replicas=3)  # members' names overflow
    other = _group(other_tenant, "fine", replicas=1)
    TaskGroup.objects.filter(id=other.id).update(replicas=3)

    assert rebuild_inference_groups() == 2
    assert _live(other) == 3 and _live(legacy) == 1


@pytest.mark.django_db
def test_the_rebuild_respects_the_pending_cap(tenant, other_tenant, settings):
    settings.HETEROFLOW_MAX_PENDING_PER_TENANT = 5
    greedy = _group(tenant, "greedy", replicas=1)
    TaskGroup.objects.filter(id=greedy.id).update(replicas=1000)
    other = _group(other_tenant, "fine", replicas=1)
    TaskGroup.objects.filter(id=other.id).update(replicas=2)

    assert rebuild_inference_groups() == 1
    assert _live(greedy) == 1 and _live(other) == 2


def _fail_for(task_id, real):
    def transition(candidate_id, *args, **kwargs):
        if candidate_id == task_id:
            raise RuntimeError("a row the code did not expect")
        return real(candidate_id, *args, **kwargs)
    return transition


@pytest.mark.django_db
def test_backlog_recovery_goes_on_past_a_task_that_fails(tenant, monkeypatch, caplog):
    node = make_node(status="offline")
    first, second = make_task(tenant=tenant, gpu_required=1), make_task(tenant=tenant, gpu_required=1)
    for task in (first, second):
        assert task_transition(task.id, "pending", "scheduled", node=node, gpus=[0])
    monkeypatch.setattr(loops, "task_transition", _fail_for(first.id, task_transition))

    assert loops.recover_backlog() == 1
    assert Task.objects.get(id=second.id).status == "pending"
    assert f"backlog recovery of task {first.id} failed" in caplog.text


@pytest.mark.django_db
def test_timeouts_go_on_past_a_task_that_fails(tenant, monkeypatch, settings):
    settings.SCHEDULER = {**settings.SCHEDULER, "default_task_timeout": 60}
    node = make_node()
    tasks = [make_task(tenant=tenant, gpu_required=1) for _ in range(2)]
    for task in tasks:
        assert task_transition(task.id, "pending", "scheduled", node=node, gpus=[0])
        assert task_transition(task.id, "scheduled", "running")
    Task.objects.update(started_at=timezone.now() - timedelta(hours=1))
    monkeypatch.setattr(loops, "task_transition", _fail_for(tasks[0].id, task_transition))

    assert loops.enforce_task_timeouts() == 1
    assert Task.objects.get(id=tasks[1].id).status == "stopping"
