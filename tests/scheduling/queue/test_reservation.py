"""Reservation (design §16.3): a big job or gang that waited past HETEROFLOW_RESERVE_AFTER holds the node(s) closest to
fitting it; cards freed there go to no 1-card task (`Reserved`) until it binds."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.groups.services import task_group_create
from scheduling.metrics import ClusterCollector
from scheduling.models import Task, TaskGroup
from scheduling.services.task_stop import task_stop
from scheduling.services.task_transition import task_transition
from tests.factories import end_backoffs, make_node, make_task
from tests.scheduling.preemption.conftest import placed_task

pytestmark = pytest.mark.django_db


def _waited(task: Task, seconds: int = 600) -> Task:
    Task.objects.filter(id=task.id).update(created_at=timezone.now() - timedelta(seconds=seconds))
    return task


def _finish(*tasks: Task) -> None:
    for task in tasks:
        assert task_transition(task.id, "running", "succeeded")


def _attempt_message(task: Task) -> str:
    return Task.objects.select_related("attempt").get(id=task.id).attempt.message


def test_a_reserved_node_keeps_freed_cards_from_small_tasks_until_the_big_job_binds(tenant, client):
    big = make_node(name="big", cards=8)
    emptier = make_node(name="emptier", cards=8)
    on_big = [placed_task(tenant=tenant, node=big, gpus=[i], preemptible=False) for i in range(6)]
    [placed_task(tenant=tenant, node=emptier, gpus=[i], preemptible=False) for i in range(8)]
    job = _waited(make_task(tenant=tenant, gpu_required=8))
    small = make_task(tenant=tenant, gpu_required=1)

    run_cycle()

    job.refresh_from_db()
    assert job.status == lifecycle.PENDING and job.reserved_at is not None and job.nominated_node_id == big.id
    assert Task.objects.get(id=small.id).status == lifecycle.PENDING
    assert "1 Reserved" in _attempt_message(small)

    _finish(*on_big[:3])
    end_backoffs()
    run_cycle()
    assert Task.objects.get(id=small.id).status == lifecycle.PENDING
    assert Task.objects.get(id=job.id).nominated_node_id == big.id

    _finish(*on_big[3:])
    end_backoffs()
    run_cycle()
    job.refresh_from_db()
    assert (job.status, job.node_id, sorted(job.gpus)) == (lifecycle.SCHEDULED, big.id, list(range(8)))
    assert job.nominated_node_id is None


def test_a_reserved_node_keeps_the_jobs_host_cpu_from_tasks_without_cards(tenant):
    """The reservation holds the node's free CPU cores up to the job's: a CPU-only task that would have taken them
    (and kept the job out once the cards freed) waits instead."""
    node = make_node(name="big", cards=8, cpu_cores=64)
    holders = [placed_task(tenant=tenant, node=node, gpus=[i], preemptible=False, cpu_cores=1) for i in range(6)]
    job = _waited(make_task(tenant=tenant, gpu_required=8, cpu_cores=48))
    cpu_only = make_task(tenant=tenant, cpu_cores=32)

    run_cycle()

    assert Task.objects.get(id=job.id).nominated_node_id == node.id
    assert Task.objects.get(id=cpu_only.id).status == lifecycle.PENDING

    _finish(*holders)
    end_backoffs()
    run_cycle()
    job.refresh_from_db()
    assert (job.status, job.node_id) == (lifecycle.SCHEDULED, node.id)


def test_a_reserved_node_takes_no_new_shard_on_a_card_the_job_needs(tenant):
    """A card only shards occupy is held too: a new shard does not land on it, so it drains for the job."""
    node = make_node(name="big", cards=8, memory_mb=81920)
    shard = placed_task(tenant=tenant, node=node, gpu_memory_mb=10000,
                        shard={"card": 0, "memory_limit_mb": 10000, "compute_percent": 10})
    whole = [placed_task(tenant=tenant, node=node, gpus=[i], preemptible=False) for i in range(1, 8)]
    job = _waited(make_task(tenant=tenant, gpu_required=8))
    fractional = make_task(tenant=tenant, gpu_memory_mb=10000)

    run_cycle()

    assert Task.objects.get(id=job.id).nominated_node_id == node.id
    assert Task.objects.get(id=fractional.id).status == lifecycle.PENDING

    _finish(shard, *whole)
    end_backoffs()
    run_cycle()
    job.refresh_from_db()
    assert (job.status, job.node_id) == (lifecycle.SCHEDULED, node.id)


def test_a_reserved_job_moves_to_a_node_that_became_closer_to_fitting_it(tenant):
    """The job holds the node with most free cards; when another node has strictly more free (the first one's
    occupants still run), it holds that one instead and binds there."""
    first = make_node(name="first", cards=8)
    second = make_node(name="second", cards=8)
    [placed_task(tenant=tenant, node=first, gpus=[i], preemptible=False) for i in range(4)]
    on_second = [placed_task(tenant=tenant, node=second, gpus=[i], preemptible=False) for i in range(7)]
    job = _waited(make_task(tenant=tenant, gpu_required=8))

    run_cycle()
    assert Task.objects.get(id=job.id).nominated_node_id == first.id

    _finish(*on_second[:3])
    end_backoffs()
    run_cycle()
    assert Task.objects.get(id=job.id).nominated_node_id == first.id    # 4 free on each: it stays

    _finish(*on_second[3:5])
    end_backoffs()
    run_cycle()
    assert Task.objects.get(id=job.id).nominated_node_id == second.id   # 6 free there: more than its 4

    _finish(*on_second[5:])
    end_backoffs()
    run_cycle()
    job.refresh_from_db()
    assert (job.status, job.node_id) == (lifecycle.SCHEDULED, second.id)


@pytest.mark.parametrize("short", ["cpu", "memory"])
def test_a_node_whose_host_is_too_small_for_the_job_is_never_its_reserved_node(tenant, short):
    """The node with the most free cards would never fit the job even emptied: its registered CPU cores (or memory)
    are fewer than the job asks, so the job is reserved on the node that can hold it."""
    small = make_node(name="small-host", cards=8, cpu_cores=32 if short == "cpu" else 128,
                      memory_gb=64 if short == "memory" else 512)
    roomy = make_node(name="roomy-host", cards=8, cpu_cores=128, memory_gb=512)
    placed_task(tenant=tenant, node=small, gpus=[0], preemptible=False)
    [placed_task(tenant=tenant, node=roomy, gpus=[i], preemptible=False) for i in range(6)]
    job = _waited(make_task(tenant=tenant, gpu_required=8, cpu_cores=96, memory_mb=128 * 1024))

    run_cycle()

    job.refresh_from_db()
    assert job.reserved_at is not None and job.nominated_node_id == roomy.id


def test_one_reserved_job_per_gpu_type_oldest_first_and_only_past_the_wait(tenant, settings):
    settings.SCHEDULER = {**settings.SCHEDULER, "reserve_after": 300}
    node = make_node(cards=8)
    placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3, 4, 5, 6, 7], preemptible=False)
    make_node(cards=8, gpu_type="ascend", model="910B")
    oldest = _waited(make_task(tenant=tenant, gpu_type="nvidia", gpu_required=4), 900)
    younger = _waited(make_task(tenant=tenant, gpu_type="nvidia", gpu_required=4), 600)
    fresh = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=8)

    run_cycle()

    reserved = set(Task.objects.filter(reserved_at__isnull=False).values_list("id", flat=True))
    assert reserved == {oldest.id}
    assert younger.id not in reserved and fresh.id not in reserved
    metric = next(family for family in ClusterCollector().collect() if family.name == "heteroflow_reserved_jobs")
    assert [(sample.labels, sample.value) for sample in metric.samples] == [({"gpu_type": "nvidia"}, 1)]


@pytest.mark.parametrize("higher_type,reserved", [("nvidia", False), ("amd", True)])
def test_a_job_below_the_head_of_its_priority_band_is_not_reserved(tenant, higher_type, reserved):
    """A higher-priority task of another GPU type heads another band."""
    node = make_node(cards=8)
    placed_task(tenant=tenant, node=node, gpus=list(range(8)), preemptible=False)
    job = _waited(make_task(tenant=tenant, gpu_type="nvidia", gpu_required=8, priority=40))
    make_task(tenant=tenant, gpu_type=higher_type, gpu_required=1, priority=80)

    run_cycle()

    assert (Task.objects.get(id=job.id).reserved_at is not None) == reserved


def test_the_task_page_says_the_job_is_reserved(tenant, tenant_web):
    node = make_node(name="held-node", cards=8)
    placed_task(tenant=tenant, node=node, gpus=[0], preemptible=False)
    job = _waited(make_task(tenant=tenant, gpu_type="nvidia", gpu_required=8))
    run_cycle()
    page = tenant_web.get(f"/tasks/{job.id}/").content.decode()
    assert 'id="reserved"' in page and "held-node is held for this job" in page


def _waiting_gang(tenant, *, seconds: int = 600, world_size: int = 2, gpus_per_worker: int = 4):
    group = task_group_create(tenant=tenant, name=f"gang-{seconds}", type="training", world_size=world_size,
                              gpus_per_worker=gpus_per_worker, gpu_type="nvidia")
    since = timezone.now() - timedelta(seconds=seconds)
    TaskGroup.objects.filter(id=group.id).update(created_at=since)
    Task.objects.filter(group=group).update(created_at=since)
    return group


def _two_nodes_with_free(tenant, free: int) -> tuple[list, list[list[Task]]]:
    nodes = [make_node(name=f"n{i}", zone="z1", rack="r1", internal_ip=f"10.0.0.{i + 1}/24") for i in range(2)]
    busy = [[placed_task(tenant=tenant, node=node, gpus=[i], preemptible=False) for i in range(8 - free)]
            for node in nodes]
    return nodes, busy


def test_a_reserved_gang_holds_its_nodes_freed_cards_from_small_tasks_until_it_binds(tenant):
    nodes, busy = _two_nodes_with_free(tenant, free=2)
    gang = _waiting_gang(tenant)
    small = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=1)

    run_cycle()

    members = list(gang.members.order_by("rank", "id"))
    assert all(member.reserved_at is not None for member in members)
    assert sorted(member.nominated_node_id for member in members) == sorted(node.id for node in nodes)
    assert Task.objects.get(id=small.id).status == lifecycle.PENDING
    assert "Reserved" in _attempt_message(small)

    _finish(busy[0][0], busy[1][0])
    end_backoffs()
    run_cycle()
    assert Task.objects.get(id=small.id).status == lifecycle.PENDING
    assert set(gang.members.values_list("status", flat=True)) == {lifecycle.PENDING}

    _finish(busy[0][1], busy[1][1])
    end_backoffs()
    run_cycle()
    members = list(gang.members.all())
    assert {member.status for member in members} == {lifecycle.SCHEDULED}
    assert sorted(member.node_id for member in members) == sorted(node.id for node in nodes)
    assert {member.nominated_node_id for member in members} == {None}
    assert Task.objects.get(id=small.id).status == lifecycle.PENDING


@pytest.mark.parametrize("stopped", [2, 1], ids=["cancelled", "no-longer-whole"])
def test_a_reserved_gang_leaving_the_queue_frees_its_held_cards(tenant, stopped):
    nodes, _ = _two_nodes_with_free(tenant, free=2)
    gang = _waiting_gang(tenant)
    small = make_task(tenant=tenant, gpu_type="nvidia", gpu_required=1)
    run_cycle()
    assert gang.members.filter(nominated_node__isnull=False).count() == 2
    metric = next(family for family in ClusterCollector().collect() if family.name == "heteroflow_reserved_jobs")
    assert [(sample.labels, sample.value) for sample in metric.samples] == [({"gpu_type": "nvidia"}, 1)]

    for member in gang.members.order_by("rank")[:stopped]:
        task_stop(task=member)
    end_backoffs()
    run_cycle()

    small.refresh_from_db()
    assert small.status == lifecycle.SCHEDULED and small.node_id in {node.id for node in nodes}
    assert not gang.members.filter(status=lifecycle.PENDING, reserved_at__isnull=False).exists()


@pytest.mark.parametrize("gang_first", [True, False])
def test_a_gang_and_a_task_compete_for_their_gpu_types_reservation_oldest_first(tenant, gang_first):
    _two_nodes_with_free(tenant, free=2)
    gang = _waiting_gang(tenant, seconds=900 if gang_first else 600)
    job = _waited(make_task(tenant=tenant, gpu_type="nvidia", gpu_required=8), 600 if gang_first else 900)

    run_cycle()

    gang_reserved = set(gang.members.values_list("reserved_at", flat=True)) != {None}
    job_reserved = Task.objects.get(id=job.id).reserved_at is not None
    assert (gang_reserved, job_reserved) == (gang_first, not gang_first)
    assert set(Task.objects.filter(nominated_node__isnull=False).values_list("reserved_at", flat=True)) != {None}


def test_a_reserved_gang_members_page_names_its_held_node(tenant, tenant_web):
    _two_nodes_with_free(tenant, free=2)
    gang = _waiting_gang(tenant)
    run_cycle()
    for member in gang.members.select_related("nominated_node"):
        page = tenant_web.get(f"/tasks/{member.id}/").content.decode()
        assert 'id="reserved"' in page and f"{member.nominated_node.name} is held for this job" in page


@pytest.mark.parametrize("refused_by", ["quota", "inactive tenant"])
def test_a_job_its_prefilters_refuse_never_takes_the_gpu_types_reservation_the_next_eligible_one_does(
        tenant, other_tenant, refused_by):
    """A tenant over its quota (or inactive) cannot block a GPU type: its big job, older and of a higher priority,
    is not reserved, and another tenant's waiting job is, on the empty node; that tenant's tasks never read
    `Reserved`."""
    empty = make_node(name="empty", cards=8)
    if refused_by == "quota":
        tenant.gpu_quota = 2
        tenant.save(update_fields=["gpu_quota"])
    else:
        tenant.status = tenant.Status.INACTIVE
        tenant.save(update_fields=["status"])
    busy = make_node(name="busy", cards=8)
    [placed_task(tenant=other_tenant, node=busy, gpus=[i], preemptible=False) for i in range(8)]
    [placed_task(tenant=other_tenant, node=empty, gpus=[i], preemptible=False) for i in range(2)]
    abuser = _waited(make_task(tenant=tenant, gpu_required=8, priority=100), seconds=900)
    eligible = _waited(make_task(tenant=other_tenant, gpu_required=8, priority=50), seconds=700)

    run_cycle()

    abuser.refresh_from_db()
    assert (abuser.status, abuser.reserved_at, abuser.nominated_node_id) == (lifecycle.PENDING, None, None)
    eligible.refresh_from_db()
    assert eligible.reserved_at is not None and eligible.nominated_node_id == empty.id


def test_a_reserved_job_its_quota_now_refuses_loses_the_reservation_to_the_next_eligible_one(tenant, other_tenant):
    node = make_node(name="big", cards=8)
    [placed_task(tenant=other_tenant, node=node, gpus=[i], preemptible=False) for i in range(2)]
    first = _waited(make_task(tenant=tenant, gpu_required=8), seconds=900)
    second = _waited(make_task(tenant=other_tenant, gpu_required=8), seconds=700)
    run_cycle()
    assert Task.objects.get(id=first.id).nominated_node_id == node.id

    tenant.gpu_quota = 2
    tenant.save(update_fields=["gpu_quota"])
    end_backoffs()
    run_cycle()

    first.refresh_from_db()
    assert (first.reserved_at, first.nominated_node_id) == (None, None)
    second.refresh_from_db()
    assert second.reserved_at is not None and second.nominated_node_id == node.id
