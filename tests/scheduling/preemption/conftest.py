from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import PluginConfig
from scheduling.models import Task
from scheduling.services.task_transition import task_transition
from tests.factories import make_task


def placed_task(*, tenant, node, gpus=(), status="running", priority=50, preemptible=True, age_seconds=0,
                shard=None, **fields) -> Task:
    """A task already bound to `node` (through the real transitions, so the node's ledger counts it)."""
    task = make_task(tenant=tenant, priority=priority, preemptible=preemptible, gpu_required=len(gpus), **fields)
    assert task_transition(task.id, "pending", "scheduled", node=node, gpus=list(gpus), shard=shard)
    if status in ("running", "preempting"):
        assert task_transition(task.id, "scheduled", "running")
    if status == "preempting":
        assert task_transition(task.id, "running", "preempting")
    if age_seconds:
        Task.objects.filter(id=task.id).update(created_at=timezone.now() - timedelta(seconds=age_seconds))
    task.refresh_from_db()
    return task


def set_preempt_stage(stage: str) -> None:
    PluginConfig.objects.update_or_create(name="preempt", defaults={"enabled": True, "weight": 0,
                                                                    "extra": {"preempt_stage": stage}})


def statuses(*tasks) -> list[str]:
    return [Task.objects.get(id=task.id).status for task in tasks]


@pytest.fixture
def running_stage(db):
    set_preempt_stage("running")
