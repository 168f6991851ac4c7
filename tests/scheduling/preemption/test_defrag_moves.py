"""Defragmentation in the cycle (design §16.3): a reserved 8-card job waiting on scattered cards gets them after the
fewest moves of preemptible batch tasks, each nominated on its target; never training, never beyond the budget; the
plan endpoint and the diagnostics panel show the same plan first and write nothing."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.framework import reasons
from scheduling.models import PluginConfig, Task, TaskEvent
from scheduling.preemption.moves import MOVE_REASON, moves_in_last_hour
from scheduling.preemption.settle import settle_preempted
from scheduling.services.task_transition import task_transition
from tests.factories import end_backoffs, make_node, make_task
from tests.scheduling.preemption.conftest import placed_task

pytestmark = pytest.mark.django_db


def set_defrag(*, enabled: bool = True, max_moves: int = 4, moves_per_hour: int = 20) -> None:
    PluginConfig.objects.update_or_create(name="defrag", defaults={
        "enabled": enabled, "weight": 0, "extra": {"max_moves": max_moves, "moves_per_hour": moves_per_hour}})


@pytest.fixture
def scattered(tenant, running_stage):
    """big: a 2-card and a 1-card preemptible batch task (5 free); wide: three 1-card batch tasks (5 free); spare:
    6 cards of a task that may not move (2 free). 12 cards are free, no node has 8. An 8-card job has waited 10
    minutes (it is reserved on big or wide, both closest). Emptying big takes 2 moves (to spare and wide), wide 3."""
    big, wide, spare = make_node(name="big"), make_node(name="wide"), make_node(name="spare")
    movers = [placed_task(tenant=tenant, node=big, gpus=[0, 1], type="batch"),
              placed_task(tenant=tenant, node=big, gpus=[2], type="batch")]
    others = [placed_task(tenant=tenant, node=wide, gpus=[index], type="batch") for index in range(3)]
    placed_task(tenant=tenant, node=spare, gpus=list(range(6)), preemptible=False)
    job = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=8)
    Task.objects.filter(id=job.id).update(created_at=timezone.now() - timedelta(seconds=600))
    return big, spare, movers, others, job


def test_the_job_binds_after_the_fewest_moves(scattered):
    big, spare, movers, others, job = scattered
    set_defrag()

    run_cycle()

    job.refresh_from_db()
    assert job.reserved_at is not None and job.nominated_node_id == big.id
    assert job.attempt.code == reasons.PREEMPTION_PENDING and "Defragmentation: moving 2 tasks off big" in \
        job.attempt.message
    moved = Task.objects.filter(status=lifecycle.PREEMPTING).order_by("id")
    assert [task.id for task in moved] == [task.id for task in movers]
    assert all(task.reason.startswith(MOVE_REASON) and task.nominated_node_id is not None for task in moved)
    assert all(Task.objects.get(id=task.id).status == lifecycle.RUNNING for task in others)

    # While they stop, nothing more is moved.
    end_backoffs()
    run_cycle()
    assert Task.objects.filter(status=lifecycle.PREEMPTING).count() == 2
    assert Task.objects.get(id=job.id).status == lifecycle.PENDING

    targets = {task.id: task.nominated_node_id for task in moved}
    for task in movers:
        assert settle_preempted(task.id)
    end_backoffs()
    run_cycle()

    job.refresh_from_db()
    assert (job.status, job.node_id, sorted(job.gpus)) == (lifecycle.SCHEDULED, big.id, list(range(8)))
    for task_id, target in targets.items():
        task = Task.objects.get(id=task_id)
        assert (task.status, task.node_id) == (lifecycle.SCHEDULED, target)


def test_a_job_whose_node_is_being_emptied_keeps_it_when_another_frees_more(scattered):
    """Reservation moves a job to a node with strictly more free cards, but not while defrag's moves for it stop:
    their cards on its node are about to be its own."""
    big, spare, movers, others, job = scattered
    set_defrag()
    run_cycle()
    assert Task.objects.get(id=job.id).nominated_node_id == big.id

    for task in others[:2]:
        assert task_transition(task.id, lifecycle.RUNNING, lifecycle.SUCCEEDED)
    end_backoffs()
    run_cycle()

    assert Task.objects.get(id=job.id).nominated_node_id == big.id
    assert Task.objects.filter(status=lifecycle.PREEMPTING).count() == 2


def test_training_is_never_moved(tenant, running_stage):
    big, spare = make_node(name="big"), make_node(name="spare")
    placed_task(tenant=tenant, node=big, gpus=[0, 1], type="training", preemptible=False)
    placed_task(tenant=tenant, node=spare, gpus=[0, 1], type="inference")
    job = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=8)
    Task.objects.filter(id=job.id).update(created_at=timezone.now() - timedelta(seconds=600))
    set_defrag()

    run_cycle()

    assert not Task.objects.filter(status=lifecycle.PREEMPTING).exists()
    assert "Defragmentation: no set of at most 4 moves" in Task.objects.get(id=job.id).attempt.message


def test_never_more_moves_than_the_budget(scattered):
    *_, job = scattered
    set_defrag(moves_per_hour=1)

    run_cycle()

    assert not Task.objects.filter(status=lifecycle.PREEMPTING).exists()
    assert "no set of at most 1 moves" in Task.objects.get(id=job.id).attempt.message

    set_defrag(moves_per_hour=2)
    end_backoffs()
    run_cycle()
    assert Task.objects.filter(status=lifecycle.PREEMPTING).count() == 2
    assert moves_in_last_hour() == 2


def test_the_plan_endpoint_shows_the_plan_first_and_writes_nothing(scattered, admin_client, tenant_client, admin_web):
    big, spare, movers, others, job = scattered
    set_defrag(enabled=False)
    run_cycle()   # reserves the job; defrag is off
    end_backoffs()
    before = list(Task.objects.order_by("id").values_list("id", "status", "nominated_node_id", "preemptible"))
    events = TaskEvent.objects.count()

    assert tenant_client.get("/api/v1/scheduler/defrag-plan").status_code == 403
    body = admin_client.get("/api/v1/scheduler/defrag-plan").json()

    assert body["enabled"] is False and body["max_moves"] == 4 and body["moves_last_hour"] == 0
    [planned] = body["jobs"]
    assert (planned["task"], planned["code"], planned["node"]) == (job.id, "Moves", "big")
    assert sorted((move["task"], move["from"]) for move in planned["moves"]) == [(m.id, "big") for m in movers]
    assert list(Task.objects.order_by("id").values_list("id", "status", "nominated_node_id", "preemptible")) == before
    assert TaskEvent.objects.count() == events

    page = admin_web.get("/diagnostics/").content.decode()
    assert 'id="defrag-plan"' in page and 'hx-trigger="load"' in page
    panel = admin_web.get("/diagnostics/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="defrag-plan").content.decode()
    assert f'id="defrag-job-{job.id}"' in panel and "disabled" in panel and planned["moves"][0]["to"] in panel

    set_defrag()
    run_cycle()
    acted = {task.id: task.nominated_node.name for task in Task.objects.filter(status=lifecycle.PREEMPTING)}
    assert acted == {move["task"]: move["to"] for move in planned["moves"]}


def test_the_settings_are_edited_like_other_plugins_and_checked(admin_client):
    saved = admin_client.put("/api/v1/plugins/defrag", {"extra": {"max_moves": 2, "moves_per_hour": 5}},
                             format="json")
    assert saved.status_code == 200 and saved.json()["extra"] == {"max_moves": 2, "moves_per_hour": 5}
    refused = admin_client.put("/api/v1/plugins/defrag", {"extra": {"max_moves": 99}}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "extra.max_moves"
    assert admin_client.get("/api/v1/scheduler/defrag-plan").json()["max_moves"] == 2
    weighted = admin_client.put("/api/v1/plugins/queue-sort", {"extra": {"order": "weighted"}}, format="json")
    assert weighted.status_code == 200
    # Always on: switching it off is a 400 naming `enabled`, as for the filters that must stay on.
    assert admin_client.put("/api/v1/plugins/queue-sort", {"enabled": False}, format="json").status_code == 400


def test_the_jobs_tenant_reads_other_tenants_moves_counted_and_no_node_dedicated_to_them(tenant, other_tenant,
                                                                                          running_stage):
    """big: another tenant's 2-card task and the job's tenant's 1-card task (5 free); private: dedicated to the other
    tenant, 2 free; spare: 1 free. Emptying big moves the other tenant's task to its private node."""
    big = make_node(name="big")
    private = make_node(name="globex-private-node", dedicated_tenant=other_tenant)
    spare = make_node(name="spare")
    theirs = placed_task(tenant=other_tenant, node=big, gpus=[0, 1], type="batch")
    mine = placed_task(tenant=tenant, node=big, gpus=[2], type="batch")
    placed_task(tenant=other_tenant, node=private, gpus=list(range(6)), preemptible=False)
    placed_task(tenant=tenant, node=spare, gpus=list(range(7)), preemptible=False)
    job = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=8)
    Task.objects.filter(id=job.id).update(created_at=timezone.now() - timedelta(seconds=600))
    set_defrag()

    run_cycle()

    assert Task.objects.get(id=theirs.id).nominated_node_id == private.id
    message = Task.objects.get(id=job.id).attempt.message
    assert f"moving 2 tasks off big (task {mine.id} to spare, 1 task of other tenants)" in message
    assert f"task {theirs.id}" not in message and "globex-private-node" not in message
