"""design §17.2: one rollout at a time per group, also when two updates arrive at once (real threads, PostgreSQL)."""

import threading

import pytest
from django.db import connection

from heteroflow_site.errors import DomainError
from scheduling.groups.rollout import task_group_update
from scheduling.groups.services import task_group_create
from scheduling.models import GroupRevision, TaskGroup

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_concurrent_updates_start_one_rollout(tenant):
    group = task_group_create(tenant=tenant, name="svc", type="inference", world_size=1, gpus_per_worker=1,
                              replicas=2, image="vllm:1")
    barrier = threading.Barrier(2)
    outcomes = []

    def update(image):
        try:
            barrier.wait()
            task_group_update(group=TaskGroup.objects.get(id=group.id), image=image)
            outcomes.append("rolled")
        except DomainError as refusal:
            outcomes.append(refusal.code)
        finally:
            connection.close()

    threads = [threading.Thread(target=update, args=(image,)) for image in ("vllm:2", "vllm:3")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["rolled", "rollout_in_progress"]
    assert GroupRevision.objects.filter(group=group, state="rolling_out").count() == 1
    assert TaskGroup.objects.get(id=group.id).revision == 2
