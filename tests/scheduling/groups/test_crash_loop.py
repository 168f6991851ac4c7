"""Crash-loop backoff of inference replicas (issue 27 item 7): a failing replica was recreated every 10 s forever."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling import lifecycle
from scheduling.groups.crash_loop import backoff_delay, crash_loop
from scheduling.groups.replicas import rebuild_inference_groups
from scheduling.models import TaskGroup, TaskType
from tests.factories import make_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def service(tenant):
    return TaskGroup.objects.create(tenant=tenant, name="svc", type=TaskType.INFERENCE, replicas=1,
                                    gpus_per_worker=1)


def _ended(group, *, status=lifecycle.FAILED, ran=timedelta(seconds=3), ago=timedelta(seconds=1), rank=0, reason=""):
    finished = timezone.now() - ago
    return make_task(tenant=group.tenant, group=group, rank=rank, type=TaskType.INFERENCE, gpu_required=1,
                     status=status, started_at=finished - ran, finished_at=finished, reason=reason)


def test_the_delay_doubles_per_crash_up_to_the_cap(settings):
    settings.SCHEDULER = {**settings.SCHEDULER, "replica_backoff_seconds": 10, "replica_backoff_max_seconds": 300}
    assert [backoff_delay(n).total_seconds() for n in range(8)] == [0, 10, 20, 40, 80, 160, 300, 300]
    assert backoff_delay(10_000).total_seconds() == 300


def test_consecutive_crashes_count_back_to_a_replica_that_ran_long_enough(service):
    _ended(service, ran=timedelta(hours=2), ago=timedelta(minutes=5))
    _ended(service, ago=timedelta(minutes=3))
    _ended(service, ago=timedelta(minutes=2))
    loop = crash_loop(service)
    assert loop.crashes == 2
    assert loop.delay == timedelta(seconds=20)
    _ended(service, ago=timedelta(seconds=90), reason=lifecycle.NODE_LOST_REASON)
    assert crash_loop(service).crashes == 2, "a replica lost with its node is not a crash"
    _ended(service, status=lifecycle.STOPPED, ago=timedelta(minutes=1))
    assert crash_loop(service).crashes == 0


def test_the_rebuild_waits_out_the_backoff_then_creates_the_replica(service, settings):
    """Before: a replica failing at once was recreated by every 10 s rebuild, forever."""
    for minutes in (3, 2):
        _ended(service, ago=timedelta(minutes=minutes))
    _ended(service, ago=timedelta(seconds=5))
    assert crash_loop(service).delay == timedelta(seconds=40)

    assert rebuild_inference_groups() == 0
    assert not service.members.filter(status=lifecycle.PENDING).exists()

    service.members.update(finished_at=timezone.now() - timedelta(seconds=41))
    assert rebuild_inference_groups() == 1
    assert service.members.filter(status=lifecycle.PENDING).count() == 1
