"""The Bind extension point runs in the cycle: a custom Bind plugin from HETEROFLOW_EXTRA_PLUGINS refuses, binds
itself or hands placements on to the default binder (the bind pipeline); gangs meet them too."""

import random

import pytest

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.framework import reasons
from scheduling.groups.services import task_group_create
from scheduling.models import SchedulingAttempt, Task, TaskEvent
from tests.example_plugins import gatekeeper
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def with_gatekeeper(settings):
    settings.HETEROFLOW_EXTRA_PLUGINS = ["tests.example_plugins.gatekeeper.factory"]
    gatekeeper.BOUND_EXTERNALLY.clear()
    yield
    gatekeeper.BOUND_EXTERNALLY.clear()


def test_a_bind_plugin_refusing_a_node_sends_the_task_back_to_the_framework_for_another(tenant, with_gatekeeper):
    # Spread prefers the idle node, which is under maintenance.
    make_node(name="idle", cards=4, cpu_percent=0, labels={"maintenance": "true"})
    busy = make_node(name="busy", cards=4, cpu_percent=60)
    task = make_task(tenant=tenant, gpu_required=1)

    result = run_cycle(rng=random.Random(1))

    assert (result.bound, result.failed) == (1, 0)
    task.refresh_from_db()
    assert (task.status, task.node_id) == (lifecycle.SCHEDULED, busy.id)


def test_a_bind_plugin_refusing_every_node_leaves_the_task_pending_with_its_reason(tenant, with_gatekeeper):
    node = make_node(cards=4, labels={"maintenance": "true"})
    task = make_task(tenant=tenant, gpu_required=1)

    result = run_cycle(rng=random.Random(1))

    assert (result.bound, result.failed) == (0, 1)
    task.refresh_from_db()
    node.refresh_from_db()
    assert (task.status, task.node_id, node.gpu_used) == (lifecycle.PENDING, None, 0)
    attempt = SchedulingAttempt.objects.get(task=task)
    assert attempt.code == reasons.NO_SCHEDULABLE_NODES
    assert gatekeeper.UNDER_MAINTENANCE in attempt.message


def test_a_bind_plugin_that_binds_a_task_itself_keeps_the_default_binder_out(tenant, with_gatekeeper):
    make_node(name="n", cards=4)
    external = make_task(tenant=tenant, gpu_required=2, labels={"binder": "external"})
    ordinary = make_task(tenant=tenant, gpu_required=1)

    result = run_cycle(rng=random.Random(1))

    assert result.bound == 2
    assert gatekeeper.BOUND_EXTERNALLY == [(external.id, "n", [0, 1])]
    external.refresh_from_db()
    ordinary.refresh_from_db()
    # The plugin owns the external task's bind: the pipeline claimed only the ordinary one, on another card.
    assert external.status == lifecycle.PENDING and not TaskEvent.objects.filter(task=external).exists()
    assert (ordinary.status, ordinary.gpus) == (lifecycle.SCHEDULED, [2])
    assert SchedulingAttempt.objects.get(task=external).code == reasons.SCHEDULED
    assert Task.objects.filter(status=lifecycle.SCHEDULED).count() == 1


def test_a_gang_meets_the_bind_plugins_and_one_refused_member_leaves_the_whole_gang_pending(tenant,
                                                                                           with_gatekeeper):
    make_node(name="open", cards=2)
    make_node(name="closed", cards=2, labels={"maintenance": "true"})
    group = task_group_create(tenant=tenant, name="llm", type="training", world_size=4, gpus_per_worker=1,
                              parallelism="data")

    run_cycle(rng=random.Random(1))

    group.refresh_from_db()
    assert set(group.members.values_list("status", flat=True)) == {lifecycle.PENDING}
    assert group.diagnostics["code"] == reasons.NO_SCHEDULABLE_NODES
    assert gatekeeper.UNDER_MAINTENANCE in group.diagnostics["message"]
    assert not TaskEvent.objects.filter(to_status=lifecycle.SCHEDULED).exists()


def test_a_gang_the_bind_plugins_skip_is_bound_whole_by_the_default_binder(tenant, with_gatekeeper):
    make_node(name="a", cards=2)
    make_node(name="b", cards=2)
    group = task_group_create(tenant=tenant, name="llm", type="training", world_size=4, gpus_per_worker=1,
                              parallelism="data")

    run_cycle(rng=random.Random(1))

    assert set(group.members.values_list("status", flat=True)) == {lifecycle.SCHEDULED}
    assert gatekeeper.BOUND_EXTERNALLY == []
