import threading
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from nodes.models import Node
from scheduling import lifecycle
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, task_info_from_row
from scheduling.fair_share.quotas import largest_cards, load_quota_book, tenant_gpu_usage
from scheduling.framework import reasons
from scheduling.framework.interfaces import CycleState
from scheduling.framework.snapshot import ClusterSnapshot, SchedulerConfig
from scheduling.framework.status import Code
from scheduling.models import Task
from scheduling.plugins.quota import QuotaPreFilter
from tenants.models import Tenant
from tests.factories import make_node, make_task
from tests.scheduling.bind.single import bind_task

pytestmark = pytest.mark.django_db


def _info(task):
    return task_info_from_row(Task.objects.filter(id=task.id).values_list(*TASK_INFO_FIELDS).get())


def check_admission(task, usage):
    """The quota PreFilter's verdict: None when admitted, else its Status."""
    status = QuotaPreFilter().pre_filter(CycleState(), task, ClusterSnapshot(nodes=[], quotas=usage))
    return None if status.is_success else status


def test_usage_sums_cards_of_active_tasks_only_fractional_ones_as_their_share(tenant, other_tenant):
    node = make_node(cards=8, memory_mb=81920)
    for status in lifecycle.ACTIVE_STATES:
        make_task(tenant=tenant, gpu_required=1, status=status, node=node)
    for status in (lifecycle.PENDING, *lifecycle.TERMINAL_STATES):
        make_task(tenant=tenant, gpu_required=5, status=status)
    make_task(tenant=other_tenant, gpu_required=2, status=lifecycle.RUNNING, node=node)
    # design §16.2: a fractional task counts its memory over its card's, two decimals (20480 / 81920 = 0.25).
    make_task(tenant=other_tenant, gpu_memory_mb=20480, status=lifecycle.RUNNING, node=node, gpus=[3],
              card_type="nvidia", shard={"card": 3, "memory_limit_mb": 20480, "compute_percent": 25})

    assert tenant_gpu_usage() == {tenant.id: 4, other_tenant.id: Decimal("2.25")}


def test_a_fractional_task_whose_card_is_unknown_counts_a_whole_card(tenant):
    make_task(tenant=tenant, gpu_memory_mb=1024, status=lifecycle.RUNNING)

    assert tenant_gpu_usage() == {tenant.id: 1}


def test_a_task_within_quota_is_admitted():
    capped = Tenant.objects.create(name="capped", gpu_quota=4)
    make_task(tenant=capped, gpu_required=2, status=lifecycle.RUNNING)

    assert check_admission(_info(make_task(tenant=capped, gpu_required=2)), load_quota_book()) is None


def test_a_task_over_quota_gets_the_quota_line():
    capped = Tenant.objects.create(name="capped", gpu_quota=4)
    make_task(tenant=capped, gpu_required=3, status=lifecycle.RUNNING)

    status = check_admission(_info(make_task(tenant=capped, gpu_required=2)), load_quota_book())

    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reason == "quota exceeded: used 3 / quota 4, asked 2"


def test_unlimited_tenants_are_not_limited_and_fractional_tasks_count_against_the_cap(tenant):
    zero = Tenant.objects.create(name="zero", gpu_quota=0)
    make_node(memory_mb=81920)
    usage = load_quota_book()

    assert check_admission(_info(make_task(tenant=tenant, gpu_required=64)), usage) is None
    # design §16.2: a quota of 0 no longer lets a tenant hold cards through gpu_memory_mb.
    refused = check_admission(_info(make_task(tenant=zero, gpu_memory_mb=8192, gpu_type="nvidia")), usage)
    assert refused.reason == "quota exceeded: used 0 / quota 0, asked 0.1"
    assert check_admission(_info(make_task(tenant=zero, gpu_required=1)), usage) is not None


def test_the_cycles_book_reads_the_usage_of_limited_tenants_only(tenant):
    from tenants.models import Cohort, TenantGpuQuota

    capped = Tenant.objects.create(name="capped", gpu_quota=8)
    typed = Tenant.objects.create(name="typed")
    TenantGpuQuota.objects.create(tenant=typed, gpu_type="nvidia", nominal=2)
    member = Tenant.objects.create(name="member", cohort=Cohort.objects.create(name="pool"))
    for holder in (tenant, capped, typed, member):
        make_task(tenant=holder, gpu_required=1, gpu_type="nvidia", status=lifecycle.RUNNING)

    book = load_quota_book(limited_only=True)

    assert set(book.total) == {capped.id, typed.id, member.id}
    assert set(load_quota_book().total) == {tenant.id, capped.id, typed.id, member.id}
    assert check_admission(_info(make_task(tenant=tenant, gpu_required=64)), book) is None


def test_binds_in_one_cycle_count_against_the_quota():
    capped = Tenant.objects.create(name="capped", gpu_quota=3)
    first, second = (_info(make_task(tenant=capped, gpu_required=2)) for _ in range(2))
    usage = load_quota_book()

    assert check_admission(first, usage) is None
    usage.record_bind(first, gpu_type="nvidia", share=200)

    assert check_admission(second, usage).reason == "quota exceeded: used 2 / quota 3, asked 2"


def test_live_check_counts_committed_usage_and_not_the_task_itself():
    capped = Tenant.objects.create(name="capped", gpu_quota=3)
    make_task(tenant=capped, gpu_required=2, status=lifecycle.RUNNING)
    node = make_node(cards=4)
    fits, too_big = make_task(tenant=capped, gpu_required=1), make_task(tenant=capped, gpu_required=2)
    snapshot_node = build_snapshot().node(node.id)

    refused = bind_task(_info(too_big), snapshot_node, [0, 1], config=SchedulerConfig())
    assert refused.code == reasons.QUOTA_EXCEEDED and "used 2 / quota 3, asked 2" in refused.message
    assert bind_task(_info(fits), snapshot_node, [0], config=SchedulerConfig()).bound


@pytest.mark.django_db(transaction=True)
def test_concurrent_binds_of_one_tenant_never_exceed_its_quota():
    capped = Tenant.objects.create(name="capped", gpu_quota=2)
    # One node per task, so that the node ledger's row lock does not serialise the binds by itself.
    snapshot_nodes = []
    tasks = []
    for _ in range(6):
        tasks.append(_info(make_task(tenant=capped, gpu_required=1)))
        snapshot_nodes.append(make_node(cards=1).id)
    snapshot = build_snapshot()
    start = threading.Barrier(len(tasks))
    outcomes = []

    def bind(task, node_id):
        try:
            start.wait()
            outcomes.append(bind_task(task, snapshot.node(node_id), [0], config=SchedulerConfig()))
        finally:
            connection.close()

    threads = [threading.Thread(target=bind, args=placement) for placement in zip(tasks, snapshot_nodes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcome.code for outcome in outcomes) == [reasons.QUOTA_EXCEEDED] * 4 + [reasons.SCHEDULED] * 2
    assert Task.objects.filter(status=lifecycle.SCHEDULED).count() == 2
    assert tenant_gpu_usage() == {capped.id: 2}
    assert sum(Node.objects.values_list("gpu_used", flat=True)) == 2


def test_the_largest_cards_of_a_snapshot_are_those_of_the_card_rows():
    """issue 29 item 2: a cycle grouped every card row of the cluster; it takes them from its snapshot instead."""
    make_node(gpu_type="nvidia", memory_mb=40960, cards=2)
    make_node(gpu_type="nvidia", memory_mb=81920, cards=1, status="offline")
    make_node(gpu_type="ascend", memory_mb=65536, cards=4)
    make_node(cards=0)

    assert largest_cards(build_snapshot().nodes) == largest_cards() == {"nvidia": 81920, "ascend": 65536, "": 81920}
    assert load_quota_book(nodes=build_snapshot().nodes).largest_card_mb == load_quota_book().largest_card_mb


class _CardsReadOnce(list):
    """A node's cards that count how often they are walked."""

    walks = 0

    def __iter__(self):
        _CardsReadOnce.walks += 1
        return super().__iter__()


def test_a_cycle_reads_again_only_the_cards_of_nodes_that_changed():
    from scheduling.cache.snapshot_builder import update_in_place
    from scheduling.framework.occupancy import Occupant, assume

    make_node(gpu_type="nvidia", memory_mb=40960, cards=2)
    make_node(gpu_type="ascend", memory_mb=65536, cards=4)
    nodes = build_snapshot().nodes
    for node in nodes:
        node.cards = _CardsReadOnce(node.cards)
    assert largest_cards(nodes) == {"nvidia": 40960, "ascend": 65536, "": 65536}
    walks = _CardsReadOnce.walks

    assert largest_cards(nodes) == {"nvidia": 40960, "ascend": 65536, "": 65536}
    assert _CardsReadOnce.walks == walks

    # The node read again with bigger cards, and a placement on the other: both are walked again.
    bigger = build_snapshot().nodes[0]
    bigger.cards[0].memory_total_mb = 81920
    update_in_place(nodes[0], bigger)
    assume(nodes[1], Occupant.of_row(tenant_id=1, task_type="batch", gpus=[0], shard=None, gpu_memory_mb=0))
    assert largest_cards(nodes) == {"nvidia": 81920, "ascend": 65536, "": 81920}


def test_the_cycles_book_reads_no_usage_on_a_cluster_without_quotas(tenant):
    make_task(tenant=tenant, gpu_required=1, gpu_type="nvidia", status=lifecycle.RUNNING)

    with CaptureQueriesContext(connection) as without_quotas:
        book = load_quota_book(limited_only=True, nodes=[])
    Tenant.objects.filter(id=tenant.id).update(gpu_quota=4)
    with CaptureQueriesContext(connection) as with_a_quota:
        limited = load_quota_book(limited_only=True, nodes=[])

    assert len(without_quotas) == 2 and book.total == {}
    assert len(with_a_quota) == 3 and set(limited.total) == {tenant.id}
