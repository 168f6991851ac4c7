"""design §17.2: the readiness a node reports is stored only for its own running replicas; a ready replica that
fails its probe `failure_threshold` times in a row is restarted, one that never was ready is not."""

import pytest

from scheduling.groups.readiness import readiness_apply
from scheduling.groups.services import task_group_create
from scheduling.services.task_transition import task_transition
from tests.factories import make_node

pytestmark = pytest.mark.django_db

PROBE = {"path": "/health", "port": None, "period_seconds": 10, "failure_threshold": 3}


def _running_replicas(tenant, node, count=2):
    group = task_group_create(tenant=tenant, name="svc", type="inference", world_size=1, gpus_per_worker=1,
                              replicas=count, readiness=PROBE)
    replicas = list(group.members.order_by("rank"))
    for index, task in enumerate(replicas):
        task_transition(task.id, "pending", "scheduled", node=node, gpus=[index])
        task_transition(task.id, "scheduled", "running")
    return group, replicas


def test_ready_is_stored_for_the_reporting_nodes_replicas_only(tenant):
    node, other = make_node(), make_node()
    _group, (mine, theirs) = _running_replicas(tenant, node)
    type(theirs).objects.filter(id=theirs.id).update(node=other)

    readiness_apply(node_id=node.id, reports=[{"task": mine.id, "ready": True, "failures": 0},
                                              {"task": theirs.id, "ready": True, "failures": 0}])

    mine.refresh_from_db(), theirs.refresh_from_db()
    assert (mine.ready, mine.ready_at is not None) == (True, True)
    assert (theirs.ready, theirs.ready_at) == (False, None)


def test_a_ready_replica_failing_threshold_probes_is_restarted_and_a_loading_one_is_not(tenant):
    node = make_node()
    _group, (serving, loading) = _running_replicas(tenant, node)
    readiness_apply(node_id=node.id, reports=[{"task": serving.id, "ready": True, "failures": 0}])

    assert readiness_apply(node_id=node.id, reports=[{"task": serving.id, "ready": False, "failures": 2},
                                                     {"task": loading.id, "ready": False, "failures": 9}]) == []
    restarted = readiness_apply(node_id=node.id, reports=[{"task": serving.id, "ready": False, "failures": 3},
                                                          {"task": loading.id, "ready": False, "failures": 10}])

    assert restarted == [serving.id]
    serving.refresh_from_db(), loading.refresh_from_db()
    assert (serving.status, serving.reason) == ("stopping", "restarted: readiness probe failed 3 times in a row")
    assert loading.status == "running"
