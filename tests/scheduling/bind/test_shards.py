import pytest
from django.db import transaction

from scheduling import lifecycle
from scheduling.bind.live import lock_and_read
from scheduling.bind.recheck import BindRefused, make_shard
from scheduling.framework.sharing import compute_percent_for, may_share
from scheduling.framework.snapshot import SchedulerConfig, TenancyView
from scheduling.models import Task
from scheduling.services.task_transition import task_transition
from scheduling.bind.shards import ShardAllocationError, occupancy_of, qos_for
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, task_info_from_row
from scheduling.cache.snapshot_builder import build_tenancy
from tenants.models import ShareGroup, Tenant
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db

CARD_MB = 81920
# max(500 MB, 10 % of 81920 MB)
FREE_AFTER_RESERVE_MB = CARD_MB - 8192


def allocate_shard(*, task, node, card):
    """The shard bind makes for `task` on `card` of `node`, from the rows bind locks and reads."""
    info = task_info_from_row(Task.objects.filter(id=task.id).values_list(*TASK_INFO_FIELDS).get())
    with transaction.atomic():
        live = lock_and_read([node.id], [task.tenant_id]).nodes[node.id]
        try:
            return make_shard(info, live, [card], SchedulerConfig.from_settings(), None)
        except BindRefused as refused:
            raise ShardAllocationError(refused.message) from refused


def shard_occupancy(node_id):
    return occupancy_of(Task.objects.filter(node_id=node_id, status__in=lifecycle.ACTIVE_STATES)
                        .values_list("tenant_id", "gpus", "shard"))


def _place(task, node, card=0):
    """Bind `task` as the scheduler does: shard made and persisted in one transaction."""
    with transaction.atomic():
        shard = allocate_shard(task=task, node=node, card=card)
        assert task_transition(task.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=node, gpus=[card], shard=shard)
    task.refresh_from_db()
    return task


def _fractional(tenant, memory_mb, **fields):
    return make_task(tenant=tenant, gpu_memory_mb=memory_mb, **fields)


@pytest.mark.parametrize(
    ("vendor", "model", "qos"),
    [
        ("nvidia", "A100-SXM4-80GB", "guaranteed"),
        ("nvidia", "NVIDIA H100 80GB HBM3", "guaranteed"),
        ("nvidia", "Tesla V100-SXM2-32GB", "guaranteed"),
        ("nvidia", "Tesla T4", "guaranteed"),
        ("nvidia", "NVIDIA A10G", "guaranteed"),
        ("nvidia", "NVIDIA L40S", "guaranteed"),
        ("nvidia", "NVIDIA GeForce RTX 3090", "guaranteed"),
        ("nvidia", "NVIDIA RTX A6000", "guaranteed"),
        ("nvidia", "Tesla P100-PCIE-16GB", "burstable"),
        ("nvidia", "Tesla K80", "burstable"),
        ("nvidia", "GeForce GTX 1080 Ti", "burstable"),
        ("nvidia", "", "burstable"),
        ("ascend", "Ascend 910B", "best-effort"),
        ("hygon", "DCU Z100", "best-effort"),
        ("cambricon", "MLU370", "best-effort"),
    ],
)
def test_qos_follows_the_hardware(vendor, model, qos):
    assert qos_for(vendor=vendor, model=model) == qos


@pytest.mark.parametrize(
    ("memory_mb", "asked", "percent"), [(20480, None, 25), (1, None, 1), (30000, None, 37), (20480, 60, 60)]
)
def test_compute_percent_is_the_tasks_or_proportional_to_memory(memory_mb, asked, percent):
    assert compute_percent_for(gpu_memory_mb=memory_mb, gpu_compute_percent=asked, card_memory_mb=CARD_MB) == percent


def test_nvidia_shard_carries_limits_and_mps_client_limits(tenant):
    node = make_node(cards=2, model="A100")
    task = _place(_fractional(tenant, 20480), node, card=1)

    assert task.shard == {
        "card": 1,
        "memory_limit_mb": 20480,
        "compute_percent": 25,
        "qos": "guaranteed",
        "env": {
            "HETEROFLOW_GPU_MEMORY_LIMIT_MB": "20480",
            "HETEROFLOW_GPU_COMPUTE_PERCENT": "25",
            "HETEROFLOW_GPU_QOS": "guaranteed",
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "1=20480M",
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
        },
    }


def test_other_vendor_shard_is_best_effort_without_mps_variables(tenant):
    node = make_node(gpu_type="ascend", cards=1, model="Ascend 910B", memory_mb=65536)
    task = _place(_fractional(tenant, 16384, gpu_compute_percent=40), node)

    assert task.shard["qos"] == "best-effort"
    assert task.shard["env"] == {
        "HETEROFLOW_GPU_MEMORY_LIMIT_MB": "16384",
        "HETEROFLOW_GPU_COMPUTE_PERCENT": "40",
        "HETEROFLOW_GPU_QOS": "best-effort",
    }


def test_shards_never_exceed_the_memory_after_reserve(tenant):
    node = make_node(cards=1)
    _place(_fractional(tenant, FREE_AFTER_RESERVE_MB - 1000), node)

    with pytest.raises(ShardAllocationError, match="1000 MB free"):
        allocate_shard(task=_fractional(tenant, 1001), node=node, card=0)
    assert _place(_fractional(tenant, 1000), node).shard["memory_limit_mb"] == 1000


def test_reported_card_memory_counts_against_the_shard(tenant):
    node = make_node(cards=1)
    node.gpus.update(memory_used_mb=70000)

    with pytest.raises(ShardAllocationError):
        allocate_shard(task=_fractional(tenant, 4000), node=node, card=0)


def test_compute_percent_over_100_is_refused(tenant):
    node = make_node(cards=1)
    _place(_fractional(tenant, 1024, gpu_compute_percent=70), node)

    with pytest.raises(ShardAllocationError, match="30 % compute left"):
        allocate_shard(task=_fractional(tenant, 1024, gpu_compute_percent=31), node=node, card=0)


def test_a_whole_card_task_keeps_shards_off_its_card(tenant):
    node = make_node(cards=1)
    make_task(tenant=tenant, gpu_required=1, status=lifecycle.RUNNING, node=node, gpus=[0])

    with pytest.raises(ShardAllocationError, match="whole-card"):
        allocate_shard(task=_fractional(tenant, 1024), node=node, card=0)


def test_an_unknown_card_is_refused(tenant):
    node = make_node(cards=1)

    with pytest.raises(ShardAllocationError, match="card 3"):
        allocate_shard(task=_fractional(tenant, 1024), node=node, card=3)


def test_tenants_without_a_common_group_never_share_a_card(tenant, other_tenant):
    node = make_node(cards=1)
    _place(_fractional(tenant, 1024), node)

    with pytest.raises(ShardAllocationError, match="may not share"):
        allocate_shard(task=_fractional(other_tenant, 1024), node=node, card=0)

    ShareGroup.objects.create(name="ab").tenants.set([tenant, other_tenant])
    assert _place(_fractional(other_tenant, 1024), node).shard["card"] == 0


def test_every_occupant_must_share_with_the_newcomer(tenant, other_tenant):
    third = Tenant.objects.create(name="initech")
    ShareGroup.objects.create(name="ab").tenants.set([tenant, other_tenant])
    ShareGroup.objects.create(name="bc").tenants.set([other_tenant, third])
    node = make_node(cards=1)
    _place(_fractional(tenant, 1024), node)
    _place(_fractional(other_tenant, 1024), node)

    with pytest.raises(ShardAllocationError, match=f"tenants \\[{tenant.id}\\]"):
        allocate_shard(task=_fractional(third, 1024), node=node, card=0)


def test_occupancy_counts_active_tasks_only(tenant, other_tenant):
    node = make_node(cards=2)
    kept = _place(_fractional(tenant, 2048, gpu_compute_percent=10), node)
    finished = _place(_fractional(tenant, 4096, gpu_compute_percent=20), node)
    make_task(tenant=other_tenant, gpu_required=1, status=lifecycle.RUNNING, node=node, gpus=[1])
    assert task_transition(finished.id, lifecycle.SCHEDULED, lifecycle.RUNNING)
    assert task_transition(finished.id, lifecycle.RUNNING, lifecycle.SUCCEEDED)

    occupancy = shard_occupancy(node.id)

    assert occupancy == {
        0: {"memory_mb": 2048, "compute_percent": 10, "shards": 1, "whole_card": False, "tenants": {tenant.id}},
        1: {"memory_mb": 0, "compute_percent": 0, "shards": 0, "whole_card": True, "tenants": {other_tenant.id}},
    }
    finished.refresh_from_db()
    assert finished.shard["memory_limit_mb"] == 4096, "a finished task keeps its shard as history"
    assert kept.status == lifecycle.SCHEDULED


def _run_to(task_id, path):
    for from_status, to_status in zip(path, path[1:]):
        assert task_transition(task_id, from_status, to_status)


@pytest.mark.parametrize(
    "path",
    [
        [lifecycle.SCHEDULED, lifecycle.RUNNING, lifecycle.SUCCEEDED],
        [lifecycle.SCHEDULED, lifecycle.RUNNING, lifecycle.FAILED],
        [lifecycle.SCHEDULED, lifecycle.RUNNING, lifecycle.STOPPING, lifecycle.STOPPED],
        [lifecycle.SCHEDULED, lifecycle.STOPPING, lifecycle.FAILED],
        [lifecycle.SCHEDULED, lifecycle.RUNNING, lifecycle.PREEMPTING, lifecycle.PENDING],
        [lifecycle.SCHEDULED, lifecycle.PENDING],
    ],
    ids=["success", "failure", "stop", "stop-before-start", "preemption", "rollback"],
)
def test_the_shard_is_released_when_the_task_leaves_the_active_states(tenant, path):
    node = make_node(cards=1)
    task = _place(_fractional(tenant, FREE_AFTER_RESERVE_MB), node)
    assert shard_occupancy(node.id)[0]["memory_mb"] == FREE_AFTER_RESERVE_MB

    _run_to(task.id, path)

    assert shard_occupancy(node.id) == {}
    task.refresh_from_db()
    if path[-1] == lifecycle.PENDING:
        assert (task.shard, task.node, task.gpus) == (None, None, [])
    # The whole card is free again: a shard of the same size fits.
    assert _place(_fractional(tenant, FREE_AFTER_RESERVE_MB), node).shard["card"] == 0



def test_the_occupant_check_fails_closed_when_the_share_groups_cannot_be_read(tenant, monkeypatch):
    node = make_node(cards=1)
    _place(_fractional(tenant, 1024), node)

    def unreadable(nodes):
        raise RuntimeError("lookup failed")

    monkeypatch.setattr("scheduling.bind.shards.build_tenancy", unreadable)

    with pytest.raises(ShardAllocationError, match="refusing to share"):
        allocate_shard(task=_fractional(tenant, 1024), node=node, card=0)


def test_the_sharing_predicate_fails_closed_when_its_lookup_raises(tenant, other_tenant):
    class BrokenGroups(dict):
        def get(self, *args):
            raise RuntimeError("lookup failed")

    ShareGroup.objects.create(name="ab").tenants.set([tenant, other_tenant])

    assert may_share(tenant.id, other_tenant.id, TenancyView(groups_of=BrokenGroups())) is False
    assert may_share(tenant.id, other_tenant.id, build_tenancy(())) is True
