"""Fractional GPUs, share groups, dedicated nodes and quotas, driven through the real scheduling cycle."""

import multiprocessing
import random
from decimal import Decimal
from itertools import combinations

import pytest
from django.db import connections
from django.db.models import Sum

from nodes.models import GPU, Node
from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.framework.sharing import may_share
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.models import Task
from scheduling.fair_share.quotas import tenant_gpu_usage
from scheduling.services.task_transition import task_transition
from scheduling.cache.snapshot_builder import build_tenancy
from tenants.models import Tenant
from tenants.services import share_group_create, share_group_update
from tests.factories import make_node, make_task
from tests.scheduling.bind.test_shards import shard_occupancy

pytestmark = pytest.mark.django_db


def _cycle():
    return run_cycle(rng=random.Random(7))


def _fractional(tenant, memory_mb=8192, **fields):
    return make_task(tenant=tenant, gpu_memory_mb=memory_mb, **fields)


def _reloaded(task):
    task.refresh_from_db()
    return task


def _attempt(task):
    return Task.objects.select_related("attempt").get(id=task.id).attempt


def test_a_second_tenant_joins_a_shared_card_only_after_a_share_group_admits_it(tenant, other_tenant):
    node = make_node(cards=1)
    first = _fractional(tenant)
    _cycle()
    first = _reloaded(first)
    assert (first.status, first.node_id, first.shard["card"]) == (lifecycle.SCHEDULED, node.id, 0)

    second = _fractional(other_tenant)
    _cycle()
    assert _reloaded(second).status == lifecycle.PENDING
    assert _attempt(second).code == "NoTenantEligibleGPU"

    share_group_create(name="ab", tenants=[tenant, other_tenant])
    _cycle()
    second = _reloaded(second)
    assert (second.status, second.node_id, second.shard["card"]) == (lifecycle.SCHEDULED, node.id, 0)
    assert _attempt(second).code == "Scheduled"


def test_a_share_group_change_governs_the_next_attempt(tenant, other_tenant):
    make_node(cards=1)
    group = share_group_create(name="ab", tenants=[tenant, other_tenant])
    _fractional(tenant)
    _cycle()

    share_group_update(group_id=group.id, name="ab", tenants=[tenant])
    late = _fractional(other_tenant)
    _cycle()

    assert _reloaded(late).status == lifecycle.PENDING
    assert _attempt(late).code == "NoTenantEligibleGPU"


def test_sharing_is_not_transitive(tenant, other_tenant):
    third = Tenant.objects.create(name="initech")
    share_group_create(name="ab", tenants=[tenant, other_tenant])
    share_group_create(name="bc", tenants=[other_tenant, third])
    make_node(cards=1)
    a, b = _fractional(tenant), _fractional(other_tenant)
    _cycle()
    assert {_reloaded(a).status, _reloaded(b).status} == {lifecycle.SCHEDULED}

    c = _fractional(third)
    _cycle()

    assert _reloaded(c).status == lifecycle.PENDING
    assert _attempt(c).code == "NoTenantEligibleGPU"


def test_a_dedicated_node_takes_only_its_tenants_tasks(tenant, other_tenant):
    node = make_node(cards=2, dedicated_tenant=tenant)
    outsider = make_task(tenant=other_tenant, gpu_required=1)
    outsider_shard = _fractional(other_tenant)
    owner = make_task(tenant=tenant, gpu_required=1)
    _cycle()

    assert _reloaded(owner).node_id == node.id
    for task in (outsider, outsider_shard):
        assert _reloaded(task).status == lifecycle.PENDING
        assert "dedicated to another tenant" in _attempt(task).message


def test_a_card_without_the_compute_a_shard_takes_is_filtered_out_and_never_bound(tenant):
    """Bind refuses a shard whose compute the card's shards leave no room for (design §8); the filters count compute
    as bind does, so the attempt says why and no bind is tried."""
    node = make_node(cards=1)
    _fractional(tenant, 4096, gpu_compute_percent=80)
    _cycle()
    squeezed = _fractional(tenant, 4096, gpu_compute_percent=30)
    fitting = _fractional(tenant, 4096, gpu_compute_percent=20)

    _cycle()

    squeezed, fitting = _reloaded(squeezed), _reloaded(fitting)
    assert (squeezed.status, squeezed.node_id, squeezed.shard) == (lifecycle.PENDING, None, None)
    attempt = _attempt(squeezed)
    assert attempt.code == "InsufficientResources"
    assert attempt.message.startswith("0/1 nodes are available: 1 Insufficient GPU compute.")
    assert "Bind refused" not in attempt.message
    assert (fitting.status, fitting.node_id, fitting.shard["compute_percent"]) == (lifecycle.SCHEDULED, node.id, 20)
    assert shard_occupancy(node.id)[0]["compute_percent"] == 100


def test_a_shard_goes_to_the_card_with_compute_left_though_another_has_more_memory(tenant):
    node = make_node(cards=2)
    # Card 0: a small shard holding all of its compute; card 1: a large one holding a quarter of it.
    _fractional(tenant, 1024, gpu_compute_percent=100)
    _cycle()
    _fractional(tenant, 40960)
    _cycle()
    assert {index: card["compute_percent"] for index, card in shard_occupancy(node.id).items()} == {0: 100, 1: 50}

    task = _fractional(tenant, 2048)
    _cycle()

    task = _reloaded(task)
    assert (task.status, task.shard["card"], task.shard["compute_percent"]) == (lifecycle.SCHEDULED, 1, 3)


def test_the_work_payload_env_carries_the_shard_limits(tenant):
    make_node(cards=1, model="H100")
    task = _fractional(tenant, 8192, env={"USER_VAR": "kept"})
    _cycle()

    env = _reloaded(task).env
    assert env["USER_VAR"] == "kept"
    assert env["HETEROFLOW_GPU_MEMORY_LIMIT_MB"] == "8192"
    assert env["HETEROFLOW_GPU_QOS"] == "guaranteed"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=8192M"


def test_tasks_over_quota_wait_and_bind_once_capacity_frees():
    capped = Tenant.objects.create(name="capped", gpu_quota=2)
    make_node(cards=8)
    tasks = [make_task(tenant=capped, gpu_required=1) for _ in range(3)]
    _cycle()

    statuses = [_reloaded(task).status for task in tasks]
    assert statuses == [lifecycle.SCHEDULED, lifecycle.SCHEDULED, lifecycle.PENDING]
    attempt = _attempt(tasks[2])
    assert (attempt.code, attempt.message) == ("QuotaExceeded", "quota exceeded: used 2 / quota 2, asked 1")

    assert task_transition(tasks[0].id, lifecycle.SCHEDULED, lifecycle.RUNNING)
    assert task_transition(tasks[0].id, lifecycle.RUNNING, lifecycle.SUCCEEDED)
    _cycle()

    assert _reloaded(tasks[2]).status == lifecycle.SCHEDULED
    assert tenant_gpu_usage() == {capped.id: 2}


def _assert_ledgers_agree(quotas):
    active = Task.objects.filter(status__in=lifecycle.ACTIVE_STATES)
    recount = dict(active.filter(node__isnull=False).values("node_id").annotate(used=Sum("gpu_required"))
                   .order_by().values_list("node_id", "used"))
    for node in Node.objects.all():
        assert node.gpu_used == recount.get(node.id, 0), f"{node.name}: real-time ledger vs heartbeat recount"
        booked = {}
        for task in active.filter(node=node, shard__isnull=False):
            booked[task.shard["card"]] = booked.get(task.shard["card"], 0) + task.gpu_memory_mb
        occupancy = shard_occupancy(node.id)
        assert {card: held["memory_mb"] for card, held in occupancy.items() if held["shards"]} == booked
    usage = tenant_gpu_usage()
    for tenant_id, quota in quotas.items():
        assert usage.get(tenant_id, 0) <= quota
    # design §16.2: fractional tasks count their share of their card, whole-card ones their cards.
    shares = sum(Decimal(round(100 * task.gpu_memory_mb / GPU.objects.get(node=task.node, index=task.shard["card"])
                               .memory_total_mb)) / 100 for task in active.filter(shard__isnull=False))
    assert sum(usage.values()) == sum(recount.values()) + shares
    assert not Task.objects.filter(status=lifecycle.PENDING).exclude(shard=None).exists()


def test_quota_and_both_ledgers_agree_through_every_state(tenant):
    # Three whole cards and two shards of 0.05 card each fit a quota of 4 (design §16.2: shards count); a fourth
    # whole card does not.
    capped = Tenant.objects.create(name="capped", gpu_quota=4)
    share_group_create(name="all", tenants=[tenant, capped])
    make_node(cards=6, name="n1")
    make_node(cards=6, name="n2")
    shards = [_fractional(owner, 4096) for owner in (tenant, capped, tenant, capped, tenant)]
    whole = [make_task(tenant=capped, gpu_required=1) for _ in range(4)]
    pair = make_task(tenant=tenant, gpu_required=2)
    _cycle()
    _assert_ledgers_agree({capped.id: 4})
    assert _reloaded(whole[3]).status == lifecycle.PENDING
    assert all(_reloaded(task).status == lifecycle.SCHEDULED for task in [*whole[:3], pair, *shards])

    arcs = {
        whole[0].id: [lifecycle.SCHEDULED, lifecycle.RUNNING, lifecycle.SUCCEEDED],
        whole[1].id: [lifecycle.SCHEDULED, lifecycle.RUNNING, lifecycle.FAILED],
        whole[2].id: [lifecycle.SCHEDULED, lifecycle.STOPPING],
        pair.id: [lifecycle.SCHEDULED, lifecycle.RUNNING, lifecycle.PREEMPTING],
        shards[0].id: [lifecycle.SCHEDULED, lifecycle.RUNNING, lifecycle.STOPPING, lifecycle.STOPPED],
        shards[1].id: [lifecycle.SCHEDULED, lifecycle.RUNNING, lifecycle.PREEMPTING, lifecycle.PENDING],
        shards[2].id: [lifecycle.SCHEDULED, lifecycle.STOPPING, lifecycle.FAILED],
        shards[3].id: [lifecycle.SCHEDULED, lifecycle.PENDING],
        shards[4].id: [lifecycle.SCHEDULED, lifecycle.RUNNING],
    }
    for task_id, path in arcs.items():
        for from_status, to_status in zip(path, path[1:]):
            assert task_transition(task_id, from_status, to_status)
            _assert_ledgers_agree({capped.id: 4})

    _cycle()
    _assert_ledgers_agree({capped.id: 4})
    # Two of capped's cards came back (success, failure); the waiting whole-card task fits its quota again.
    assert _reloaded(whole[3]).status == lifecycle.SCHEDULED
    assert tenant_gpu_usage()[capped.id] == Decimal("2.10")
    for task_id, path in arcs.items():
        if path[-1] == lifecycle.PENDING:
            assert Task.objects.get(id=task_id).status == lifecycle.SCHEDULED


def _scheduler_process(barrier, cycles):
    connections.close_all()
    barrier.wait()
    for _ in range(cycles):
        # Small windows from the shared cursor: the two instances bind different tasks at the same time, each
        # from its own, soon stale, snapshot.
        run_cycle(instance=multiprocessing.current_process().name, limit=3)
    connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_two_scheduler_processes_never_overcommit_a_card_or_mix_non_sharing_tenants():
    tenants = [Tenant.objects.create(name=name) for name in ("a", "b", "c", "d")]
    share_group_create(name="ab", tenants=tenants[:2])
    for _ in range(2):
        make_node(cards=2, memory_mb=16384)
    for round_ in range(6):
        for owner in tenants:
            # Compute stays far from 100 %, so memory and tenants are the limits under test.
            _fractional(owner, 4000 + 100 * round_, gpu_compute_percent=5)
    connections.close_all()

    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    schedulers = [context.Process(target=_scheduler_process, args=(barrier, 12), name=f"scheduler-{i}")
                  for i in range(2)]
    for process in schedulers:
        process.start()
    for process in schedulers:
        process.join(timeout=120)
    assert [process.exitcode for process in schedulers] == [0, 0]

    config = SchedulerConfig.from_settings()
    tenancy = build_tenancy(())
    placed = 0
    for card in GPU.objects.all():
        holders = list(Task.objects.filter(node_id=card.node_id, status__in=lifecycle.ACTIVE_STATES,
                                           shard__card=card.index))
        placed += len(holders)
        booked = sum(task.shard["memory_limit_mb"] for task in holders)
        assert booked <= card.memory_total_mb - config.reserve_mb(card.memory_total_mb)
        assert sum(task.shard["compute_percent"] for task in holders) <= 100
        for first, second in combinations({task.tenant_id for task in holders}, 2):
            assert may_share(first, second, tenancy), f"tenants {first} and {second} share card {card}"
    assert placed == Task.objects.filter(status=lifecycle.SCHEDULED).count() > 0
