"""Drain and uncordon (design §17.3): admins only, bad input refused, tasks stopped back to pending without counting
as preemptions, `drained` when empty, carried on by the leader-only ticker across restarts."""

import threading

import pytest
from django.db import connection

from nodes.models import Node, NodeAuditEntry
from scheduling import lifecycle
from scheduling.hardware.drain import DRAIN_LOCK_KEY, drain_nodes
from scheduling.models import Task
from scheduling.preemption.settle import settle_preempted
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db


def drain(client, node_id, body=None):
    return client.post(f"/api/v1/nodes/{node_id}/drain", body or {}, format="json")


def running_on(node, tenant, *cards, **fields):
    task = make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=list(cards), gpu_required=len(cards),
                     card_type="nvidia", **fields)
    Node.objects.filter(id=node.id).update(gpu_used=sum(
        Task.objects.filter(node=node, status__in=lifecycle.ACTIVE_STATES).values_list("gpu_required", flat=True)))
    return task


def test_drain_cordons_stops_the_tasks_and_shows_progress_then_drained(admin_client, admin_user, tenant):
    node = make_node(cards=4)
    first = running_on(node, tenant, 0, preemptible=True)
    second = running_on(node, tenant, 1, 2)
    response = drain(admin_client, node.id, {"grace_seconds": 30})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["schedulable"] is False
    assert body["drain"] == {"state": "draining", "started_at": body["drain"]["started_at"], "grace_seconds": 30,
                             "tasks_at_start": 2, "tasks_left": 2}
    assert set(Task.objects.filter(node=node).values_list("status", flat=True)) == {lifecycle.PREEMPTING}
    assert NodeAuditEntry.objects.filter(node=node, action="node.drain", actor=admin_user).exists()

    assert settle_preempted(first.id) and settle_preempted(second.id)
    first.refresh_from_db()
    assert (first.status, first.preempt_count, first.preemptible) == (lifecycle.PENDING, 0, True)
    assert first.reason.startswith(lifecycle.NODE_DRAIN_REASON)
    run = drain_nodes()
    assert run.leader and run.drained == (node.name,)
    detail = admin_client.get(f"/api/v1/nodes/{node.id}").json()
    assert detail["drain"]["state"] == "drained" and detail["drain"]["tasks_left"] == 0


def test_a_drain_survives_a_restart_the_ticker_stops_what_arrived_since(admin_client, tenant):
    node = make_node(cards=4)
    assert drain(admin_client, node.id).json()["drain"]["state"] == "drained"
    # Work that reached the node anyway (bound on a stale view before the cordon) is stopped by the next tick,
    # whatever process runs it: the state is the node's row.
    late = running_on(node, tenant, 3)
    Node.objects.filter(id=node.id).update(drain_state="draining")
    assert drain_nodes().stopping == 1
    assert Task.objects.get(id=late.id).status == lifecycle.PREEMPTING


def test_uncordon_makes_the_node_schedulable_again(admin_client, tenant):
    node = make_node(cards=2)
    drain(admin_client, node.id)
    response = admin_client.post(f"/api/v1/nodes/{node.id}/uncordon")
    assert response.status_code == 200
    assert response.json()["schedulable"] is True and response.json()["drain"] is None
    assert admin_client.post(f"/api/v1/nodes/{node.id}/uncordon").status_code == 409


def test_bad_input_unknown_node_404_negative_grace_400_tenant_403(admin_client, tenant_client, tenant):
    node = make_node(cards=2)
    running_on(node, tenant, 0)
    assert drain(admin_client, node.id + 999).status_code == 404
    assert admin_client.post(f"/api/v1/nodes/{node.id + 999}/uncordon").status_code == 404
    negative = drain(admin_client, node.id, {"grace_seconds": -1})
    assert negative.status_code == 400 and negative.json()["field"] == "grace_seconds"
    assert drain(admin_client, node.id, {"grace_seconds": 5, "force": True}).status_code == 400
    assert drain(tenant_client, node.id).status_code == 403
    assert tenant_client.post(f"/api/v1/nodes/{node.id}/uncordon").status_code == 403
    node.refresh_from_db()
    assert (node.schedulable, node.drain_state) == (True, "")
    assert Task.objects.get(node=node).status == lifecycle.RUNNING


@pytest.mark.django_db(transaction=True)
def test_only_one_instance_runs_the_drain_ticker_at_a_time(tenant):
    make_node(cards=1, drain_state="draining", schedulable=False)
    held, release = threading.Event(), threading.Event()

    def hold_the_lock():
        from django.db import connection as own, transaction

        with transaction.atomic():
            with own.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [DRAIN_LOCK_KEY])
            held.set()
            release.wait(10)
        own.close()

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    assert held.wait(10)
    try:
        assert drain_nodes().leader is False
    finally:
        release.set()
        holder.join()
    assert drain_nodes().leader is True
    connection.close()


def _service(tenant, node, replicas):
    from scheduling.groups.services import task_group_create

    group = task_group_create(tenant=tenant, name="svc", type="inference", world_size=replicas, gpus_per_worker=1,
                              replicas=replicas)
    for card, member in enumerate(group.members.order_by("rank")):
        assert task_transition(member.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=node, gpus=[card])
        assert task_transition(member.id, lifecycle.SCHEDULED, lifecycle.RUNNING)
    return group


def _ready(group):
    return group.members.filter(status=lifecycle.RUNNING).count()


def test_a_services_replicas_are_replaced_elsewhere_before_they_stop(admin_client, tenant):
    """design §17.3: inference replicas are replaced elsewhere first; the service never has fewer ready replicas than
    it wants while its node drains, and a batch task on the same node leaves at once."""
    node, spare = make_node(cards=4), make_node(cards=4)
    group = _service(tenant, node, replicas=2)
    old = set(group.members.values_list("id", flat=True))
    batch = running_on(node, tenant, 3)

    assert drain(admin_client, node.id, {"grace_seconds": 20}).status_code == 200
    assert Task.objects.get(id=batch.id).status == lifecycle.PREEMPTING
    replacements = list(group.members.exclude(id__in=old))
    assert len(replacements) == 2 and {task.status for task in replacements} == {lifecycle.PENDING}
    assert set(Task.objects.filter(id__in=old).values_list("status", flat=True)) == {lifecycle.RUNNING}

    drain_nodes()  # nothing ready elsewhere yet: the old replicas keep serving, no third replacement
    assert _ready(group) == 2 and group.members.count() == 4  # two old, two new, no more
    for card, replacement in enumerate(replacements):
        assert task_transition(replacement.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=spare, gpus=[card])
        assert task_transition(replacement.id, lifecycle.SCHEDULED, lifecycle.RUNNING)
        assert _ready(group) >= 2

    drain_nodes()
    stopped = Task.objects.filter(id__in=old)
    assert set(stopped.values_list("status", flat=True)) == {lifecycle.STOPPING}
    assert set(stopped.values_list("stop_grace_seconds", "termination_grace_seconds")) == {(20, 10)}
    assert all(task.reason.startswith(lifecycle.NODE_DRAIN_REASON) for task in stopped)
    assert _ready(group) == 2


def test_a_replacement_that_never_becomes_ready_holds_the_drain_only_for_the_groups_ready_timeout(admin_client,
                                                                                                   tenant):
    from datetime import timedelta

    from django.utils import timezone

    node = make_node(cards=2)
    group = _service(tenant, node, replicas=1)
    replica = group.members.get()
    drain(admin_client, node.id)
    drain_nodes()
    assert Task.objects.get(id=replica.id).status == lifecycle.RUNNING

    Node.objects.filter(id=node.id).update(
        drain_started_at=timezone.now() - timedelta(seconds=group.ready_timeout_seconds + 1))
    drain_nodes()
    assert Task.objects.get(id=replica.id).status == lifecycle.STOPPING


def test_a_drains_grace_is_that_stops_own_and_the_task_keeps_its_grace_for_its_next_placement(admin_client, tenant):
    from datetime import timedelta

    from scheduling.preemption.watchdog import preemption_watchdog
    from scheduling.selectors import agent_work

    node = make_node(cards=4)
    task = running_on(node, tenant, 0, termination_grace_seconds=300)
    assert drain(admin_client, node.id, {"grace_seconds": 0}).status_code == 200

    stopping = Task.objects.get(id=task.id)
    assert (stopping.status, stopping.stop_grace_seconds, stopping.termination_grace_seconds) == (
        lifecycle.PREEMPTING, 0, 300)
    assert agent_work(node)["stop"] == [{"id": task.id, "status": lifecycle.PREEMPTING, "grace_seconds": 0}]
    # The watchdog waits for the drain's grace, not the task's 300 s: 60 s, the floor.
    assert preemption_watchdog(now=stopping.status_changed_at + timedelta(seconds=61)) == 1

    requeued = Task.objects.get(id=task.id)
    assert (requeued.status, requeued.stop_grace_seconds, requeued.termination_grace_seconds) == (
        lifecycle.PENDING, None, 300)
    elsewhere = make_node(cards=4)
    assert task_transition(task.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=elsewhere, gpus=[0])
    assert task_transition(task.id, lifecycle.SCHEDULED, lifecycle.STOPPING, reason="stopped by its user")
    assert agent_work(elsewhere)["stop"] == [{"id": task.id, "status": lifecycle.STOPPING, "grace_seconds": 300}]


def test_a_drain_may_give_its_tasks_more_than_a_tasks_own_longest_grace(admin_client, tenant):
    # A task's own grace is at most 600 s; a drain's up to a day (it once overwrote the task's and failed).
    node = make_node(cards=4)
    task = running_on(node, tenant, 0)
    response = drain(admin_client, node.id, {"grace_seconds": 3600})

    assert response.status_code == 200, response.content
    assert Task.objects.filter(id=task.id).values_list("status", "stop_grace_seconds").get() == (
        lifecycle.PREEMPTING, 3600)
