"""The preemption plans' snapshot comes from the process's own scheduler cache: a new generation re-reads only the
nodes that changed since the last one.

Transactional tests: the change log tells committed transactions apart, and inside one test transaction every
node the test changed would count as changed at every look.
"""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from nodes.models import Node
from scheduling.models import Task
from scheduling.what_if import preemption_plan as plan_module
from tests.factories import make_node, make_task
from tests.scheduling.preemption.conftest import placed_task, set_preempt_stage
from tests.scheduling.what_if.test_preemption_plan import plan_of, plan_on_a_fresh_snapshot

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_new_generation_reads_only_the_nodes_changed_since_the_last(tenant, other_tenant, monkeypatch):
    """issue 47 item 4: every generation read the whole cluster afresh (~1 s at 5,000 nodes), once per cycle in
    every web process showing pending tasks' pages."""
    set_preempt_stage("running")
    for index in range(6):
        placed_task(tenant=other_tenant, node=make_node(cards=8, name=f"full-{index}"), gpus=list(range(8)),
                    priority=10)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=8)
    generations = [f"cycle-{uuid.uuid4()}"]
    monkeypatch.setattr(plan_module, "_cycle_generation", lambda: generations[-1])
    snapshots = plan_module._snapshots
    builds, rereads = snapshots.full_builds, snapshots.nodes_reread

    first = plan_of(urgent.id, viewer_tenant_id=None)
    assert first["node"].startswith("full-") and snapshots.full_builds == builds + 1

    Node.objects.filter(name=first["node"]).update(status=Node.Status.OFFLINE)
    generations.append(f"cycle-{uuid.uuid4()}")
    second = plan_of(urgent.id, viewer_tenant_id=None)

    assert snapshots.full_builds == builds + 1, "no new full read"
    assert snapshots.nodes_reread == rereads + 1, "only the node that changed was read again"
    assert second["node"] != first["node"], "the plan saw the node go offline"
    assert second == plan_on_a_fresh_snapshot(urgent.id)


def test_a_plan_on_a_generation_already_read_reads_nothing(tenant, monkeypatch):
    """issue 47 item 4: the page of a pending task made the plan's read-only transaction (BEGIN, SET TRANSACTION,
    COMMIT) around a read of the task the page had just read, on a cluster the generation had already read."""
    make_node(cards=8, name="free")
    first, second = (make_task(tenant=tenant, gpu_required=1) for _ in range(2))
    monkeypatch.setattr(plan_module, "_cycle_generation", lambda: f"cycle-{uuid.uuid4()}")
    plan_of(first.id, viewer_tenant_id=None)
    monkeypatch.setattr(plan_module, "_cycle_generation", lambda: plan_module._generation.stamp)
    shown = Task.objects.get(id=second.id)

    with CaptureQueriesContext(connection) as captured:
        plan = plan_module.preemption_plan(task=shown, viewer_tenant_id=None)

    assert plan["code"] == plan_module.FITS_NOW
    # Django notes BEGIN and COMMIT as it enters and leaves the block; psycopg sends neither while nothing is read
    # inside (test_read_only.py).
    assert [query["sql"] for query in captured.captured_queries if query["sql"] not in ("BEGIN", "COMMIT")] == []
