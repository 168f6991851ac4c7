"""Work no registered node could ever hold says so (`NeverFits`), ahead of quota and the 0/N line, with the largest
node's figures and the way out."""

import pytest

from scheduling.cycle.run import run_cycle
from scheduling.framework import reasons
from scheduling.framework.never_fits import never_fits_message
from scheduling.framework.snapshot import CardInfo, NodeInfo
from scheduling.groups.services import task_group_create
from scheduling.models import SchedulingAttempt, TaskGroup
from tenants.models import Tenant
from tests.factories import make_node, make_task


def node(name: str, *, cards: int = 8, card_mb: int = 81920, cpu: int = 64, memory_gb: int = 512,
         gpu_type: str = "nvidia", dedicated: int | None = None) -> NodeInfo:
    return NodeInfo(id=hash(name), name=name, gpu_type=gpu_type if cards else "", gpu_total=cards, cpu_cores=cpu,
                    memory_gb=memory_gb, dedicated_tenant_id=dedicated,
                    cards=[CardInfo(index=i, type=gpu_type, memory_total_mb=card_mb) for i in range(cards)])


def verdict(nodes, *, tenant_id: int = 1, gpu_type: str = "", gpu_required: int = 0, gpu_memory_mb: int = 0,
            cpu_cores: float = 0, memory_mb: int = 0) -> str | None:
    return never_fits_message(tenant_id=tenant_id, gpu_type=gpu_type, gpu_required=gpu_required,
                              gpu_memory_mb=gpu_memory_mb, cpu_cores=cpu_cores, memory_mb=memory_mb, nodes=nodes)


def test_more_cards_than_any_node_names_the_largest_and_the_group_way_out():
    message = verdict([node("a", cards=4), node("b", cards=8)], gpu_type="nvidia", gpu_required=64)
    assert message.startswith("no registered nvidia node can ever hold this task: it asks for 64 GPUs "
                              "(at most 8 on one node)")
    assert "The largest node has 8 GPUs, 81920 MB per card, 64 CPU cores, 512 GB of memory" in message
    assert "world_size 8 with gpus_per_worker 8" in message


def test_each_figure_of_the_largest_node_counts():
    nodes = [node("a", card_mb=24576, cpu=32, memory_gb=128)]
    assert "40000 MB of one card (the largest card has 24576 MB)" in verdict(nodes, gpu_memory_mb=40000)
    assert "64 CPU cores (at most 32 on one node)" in verdict(nodes, cpu_cores=64)
    assert "262144 MB of memory (at most 131072 MB on one node)" in verdict(nodes, memory_mb=262144)
    # Each figure fits some node, none has both.
    both = verdict([node("many-cards", cards=8, cpu=8), node("many-cores", cards=1, cpu=128)], gpu_required=8,
                   cpu_cores=64)
    assert "more at once than any one node has" in both


def test_work_some_node_could_hold_or_no_node_of_the_type_is_not_never_fits():
    nodes = [node("a", cards=8)]
    assert verdict(nodes, gpu_type="nvidia", gpu_required=8, cpu_cores=64, memory_mb=512 * 1024) is None
    assert verdict(nodes, gpu_type="ascend", gpu_required=64) is None  # GPU type mismatch says that
    assert verdict([], gpu_required=64) is None
    # A task without cards fits a CPU-only node.
    assert verdict([node("cpu-only", cards=0, cpu=16)], cpu_cores=8) is None


def test_a_node_dedicated_to_another_tenant_is_not_counted_but_ones_own_is():
    nodes = [node("small", cards=2), node("theirs", cards=8, dedicated=2)]
    assert "at most 2 on one node" in verdict(nodes, tenant_id=1, gpu_required=4)
    assert verdict(nodes, tenant_id=2, gpu_required=4) is None


@pytest.mark.django_db
def test_the_cycle_says_never_fits_ahead_of_the_quota_and_the_zero_of_n_line():
    capped = Tenant.objects.create(name="capped", gpu_quota=2)
    for _ in range(3):
        make_node(cards=8)
    huge = make_task(tenant=capped, gpu_type="nvidia", gpu_required=64)
    over_quota = make_task(tenant=capped, gpu_type="nvidia", gpu_required=4)

    run_cycle()

    attempts = dict(SchedulingAttempt.objects.values_list("task_id", "code"))
    assert attempts == {huge.id: reasons.NEVER_FITS, over_quota.id: reasons.QUOTA_EXCEEDED}
    message = SchedulingAttempt.objects.get(task=huge).message
    assert "asks for 64 GPUs (at most 8 on one node)" in message and "world_size" in message


@pytest.mark.django_db
def test_a_gang_whose_member_no_node_could_hold_says_never_fits(tenant):
    make_node(cards=8)
    group = task_group_create(tenant=tenant, name="wide", type="training", world_size=2, gpus_per_worker=16,
                              parallelism="data", gpu_type="nvidia")

    run_cycle()

    group.refresh_from_db()
    assert group.diagnostics["code"] == reasons.NEVER_FITS
    assert "member rank 0" in group.diagnostics["message"] and "16 GPUs" in group.diagnostics["message"]
    assert TaskGroup.objects.get().status == TaskGroup.Status.PENDING
