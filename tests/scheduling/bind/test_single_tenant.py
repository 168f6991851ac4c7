"""design §16.5 at bind and in a cycle: a Hygon, MetaX or Biren node holds one tenant's card-holding tasks at a time
(issue 27 item 8)."""

import pytest

from scheduling import lifecycle
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, task_info_from_row
from scheduling.cycle.run import run_cycle
from scheduling.framework import reasons
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.models import SchedulingAttempt, Task
from scheduling.plugins.single_tenant_runtime import SINGLE_TENANT_RUNTIME
from tests.factories import make_node, make_task
from tests.scheduling.bind.single import bind_task

pytestmark = pytest.mark.django_db


def _info(task):
    return task_info_from_row(Task.objects.filter(id=task.id).values_list(*TASK_INFO_FIELDS).get())


def test_bind_refuses_a_node_another_tenant_took_since_the_snapshot_without_naming_it(tenant, other_tenant):
    node = make_node(gpu_type="hygon", model="K100", cards=4)
    stale = build_snapshot().node(node.id)
    make_task(tenant=other_tenant, status=lifecycle.RUNNING, node=node, gpus=[0], gpu_required=1)
    task = make_task(tenant=tenant, gpu_required=1)

    outcome = bind_task(_info(task), stale, [1], config=SchedulerConfig())

    assert outcome.code == reasons.NO_SCHEDULABLE_NODES
    assert SINGLE_TENANT_RUNTIME in outcome.message and node.name not in outcome.message
    task.refresh_from_db()
    assert (task.status, task.node_id) == (lifecycle.PENDING, None)


def test_a_cycle_keeps_the_node_to_the_first_tenant_and_the_other_reads_the_reason(tenant, other_tenant):
    node = make_node(gpu_type="biren", model="BR104", cards=8)
    first = make_task(tenant=tenant, gpu_required=1, priority=90)
    second = make_task(tenant=other_tenant, gpu_required=1, priority=10)

    run_cycle()

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.node_id, second.status) == (lifecycle.SCHEDULED, node.id, lifecycle.PENDING)
    attempt = SchedulingAttempt.objects.get(task=second)
    assert "1 " + SINGLE_TENANT_RUNTIME in attempt.message
    assert "Bind refused" not in attempt.message
