"""design §17.2: how a rollout step replaces replicas (surge and unavailable), finishes, and rolls back a revision
that crash-loops; its state is all in PostgreSQL, so any scheduler's step carries it on."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.groups.rollout import drive_rollouts, task_group_update
from scheduling.groups.services import task_group_create
from scheduling.models import GroupRevision, Task
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def node():
    return make_node(cards=8)


def _running_service(tenant, node, **fields):
    group = task_group_create(tenant=tenant, name="svc", type="inference", world_size=1, gpus_per_worker=1,
                              image="vllm:1", **fields)
    for index, task in enumerate(group.members.order_by("rank")):
        _run(task, node, card=index)
    return group


def _run(task, node, *, card):
    task_transition(task.id, "pending", "scheduled", node=node, gpus=[card])
    task_transition(task.id, "scheduled", "running")


def _live(group, revision):
    return group.members.filter(revision=revision, status__in=["pending", "scheduled", "running"])


def test_surge_one_unavailable_zero_starts_one_new_replica_and_stops_an_old_one_only_once_it_is_ready(tenant, node):
    group = _running_service(tenant, node, replicas=3)
    task_group_update(group=group, image="vllm:2")

    drive_rollouts()
    assert (_live(group, 1).count(), _live(group, 2).count()) == (3, 1)
    drive_rollouts()  # the new one is not running yet: nothing old stops
    assert group.members.filter(status="stopping").count() == 0

    _run(_live(group, 2).get(), node, card=5)
    drive_rollouts()

    assert group.members.filter(status="stopping", revision=1).count() == 1
    assert (_live(group, 1).count(), _live(group, 2).count()) == (2, 2)


def test_max_unavailable_one_without_surge_stops_first(tenant, node):
    group = _running_service(tenant, node, replicas=2, max_surge=0, max_unavailable=1)
    task_group_update(group=group, image="vllm:2")

    drive_rollouts()

    assert group.members.filter(status="stopping", revision=1).count() == 1
    assert _live(group, 2).count() == 1


def test_the_rollout_completes_when_every_replica_is_new_and_ready(tenant, node):
    group = _running_service(tenant, node, replicas=1)
    task_group_update(group=group, image="vllm:2")
    drive_rollouts()
    _run(_live(group, 2).get(), node, card=3)
    drive_rollouts()
    drive_rollouts()  # the old replica is still stopping: not complete yet
    assert GroupRevision.objects.get(group=group, number=2).state == "rolling_out"
    old = group.members.get(revision=1)
    task_transition(old.id, "stopping", "stopped")

    drive_rollouts()

    states = dict(GroupRevision.objects.filter(group=group).values_list("number", "state"))
    assert states == {1: "superseded", 2: "complete"}


def test_a_crash_looping_revision_is_rolled_back_and_its_replicas_stopped(tenant, node):
    group = _running_service(tenant, node, replicas=2)
    task_group_update(group=group, image="vllm:broken")
    drive_rollouts()
    now = timezone.now()
    for seconds in (30, 20, 10):  # three new replicas that failed right after starting
        make_task(tenant=tenant, group=group, revision=2, status="failed", reason="exit code 1",
                  started_at=now - timedelta(seconds=seconds + 2), finished_at=now - timedelta(seconds=seconds))

    drive_rollouts()

    revision = GroupRevision.objects.get(group=group, number=2)
    assert (revision.state, revision.reason) == ("rolling_back", "rolling back: revision 2 is crash-looping (3 "
                                                                 "crashes in a row)")
    group.refresh_from_db()
    assert (group.revision, group.image) == (1, "vllm:1")
    drive_rollouts()
    assert not _live(group, 2).exists() and _live(group, 1).count() == 2
    for stopping in group.members.filter(revision=2, status="stopping"):
        task_transition(stopping.id, "stopping", "stopped")
    drive_rollouts()
    assert GroupRevision.objects.get(group=group, number=2).state == "rolled_back"
    assert set(Task.objects.filter(group=group, status="running").values_list("image", flat=True)) == {"vllm:1"}
