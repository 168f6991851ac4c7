"""The scheduler cache: nodes and table kept between cycles, only changed nodes re-read.

Transactional tests: the change log tells committed transactions apart, and inside one test transaction every
node the test changed would count as changed at every look.
"""

import numpy as np
import pytest
from django.db import connection

from nodes.models import GPU, Node
from nodes.services import node_heartbeat_apply, node_update
from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.framework.table import NodeTable
from scheduling.models import Task
from scheduling.services.agent_reports import agent_report_status
from scheduling.services.task_transition import task_transition
from scheduling.cache.snapshot_builder import build_snapshot
from scheduling.cache.snapshot_cache import FULL_REBUILD_SECONDS, SnapshotCache, snapshot_cache
from tests.factories import make_node, make_task
from tests.nodes.conftest import card

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = SchedulerConfig()
_TABLE_COLUMNS = (
    "available", "schedulable", "dedicated", "gpu_total", "gpu_used", "inference_tasks", "cpu_usage", "memory_usage",
    "has_gpu_info", "type_bits", "region", "zone", "rack", "rdma_score", "rdma_false", "cards_by_position",
    "card_exists", "card_free", "card_no_whole", "card_ok", "card_occupied", "card_free_mb", "card_capacity_mb",
    "card_usable", "card_shardable", "card_open", "usable_cards", "cards_all_overloaded", "max_card_capacity_mb",
    "known_usage", "usage_terms", "has_cards", "card_divisor", "uniform_cards",
)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _look(cache: SnapshotCache):
    with cache.snapshot(CONFIG) as snapshot:
        return snapshot


def _assert_equals_a_fresh_build(snapshot) -> None:
    fresh = build_snapshot()
    assert snapshot.nodes == fresh.nodes
    table = NodeTable(fresh.nodes, CONFIG)
    for column in _TABLE_COLUMNS:
        np.testing.assert_array_equal(getattr(snapshot.table, column), getattr(table, column), err_msg=column)


def test_a_cache_that_missed_nothing_equals_a_fresh_build_after_every_kind_of_change(tenant):
    nodes = [make_node(cards=4, zone=f"zone-{index % 2}") for index in range(4)]
    for index in range(5):
        make_task(tenant=tenant, name=f"whole-{index}", gpu_required=1 + index % 2)
    make_task(tenant=tenant, name="shard", gpu_memory_mb=4096)
    snapshot_cache.invalidate()
    run_cycle()
    builds = snapshot_cache.full_builds

    running = Task.objects.filter(status=lifecycle.SCHEDULED).first()
    assert task_transition(running.id, lifecycle.SCHEDULED, lifecycle.RUNNING)
    agent_report_status(node=running.node, task_id=running.id, from_status=lifecycle.RUNNING,
                        to_status=lifecycle.SUCCEEDED)
    node_heartbeat_apply(node=nodes[0], cpu_percent=42.0, memory_used_mb=4096,
                         gpus=[card(index, memory_used_mb=1000 * index) for index in range(4)], labels={})
    node_update(node=nodes[1], labels={"rdma": "true", "rdma-speed": "200"}, schedulable=False)
    GPU.objects.filter(node=nodes[2], index=3).delete()
    Node.objects.filter(id=nodes[2].id).update(gpu_total=3)
    nodes[3].delete()
    # A second vendor's card 0 beside the node's NVIDIA card 0: cards are known by (type, index) (design §15.2).
    GPU.objects.create(node=nodes[2], index=0, uuid="NPU-0", type="ascend", model="910B", memory_total_mb=65536)
    Task.objects.filter(status=lifecycle.SCHEDULED, node=nodes[2]).update(card_type="nvidia")
    added = make_node(cards=8, region="cn-east")
    make_task(tenant=tenant, name="later", gpu_required=4)
    run_cycle()

    assert Task.objects.get(name="later").node_id == added.id
    snapshot = _look(snapshot_cache)
    assert snapshot_cache.full_builds == builds
    _assert_equals_a_fresh_build(snapshot)


def test_only_changed_nodes_are_read_again_the_others_stay_as_they_were(tenant):
    changed, unchanged = make_node(cards=2), make_node(cards=2)
    cache = SnapshotCache()
    first = _look(cache)
    kept = first.node(unchanged.id)
    reread = cache.nodes_reread
    node_update(node=changed, labels={"team": "ml"})

    second = _look(cache)
    assert cache.nodes_reread - reread == 1
    assert cache.full_builds == 1
    assert second.node(unchanged.id) is kept
    assert second.node(changed.id).labels == {"team": "ml"}
    assert second.table.schedulable.tolist() == [True, True]


def test_the_placements_a_cycle_made_in_memory_are_read_again(tenant):
    node = make_node(cards=2)
    cache = SnapshotCache()
    with cache.snapshot(CONFIG) as snapshot:
        # A placement applied in memory whose bind never committed (the cycle stopped, the bind was refused).
        snapshot.node(node.id).gpu_used = 2
        snapshot.table.refresh_row(snapshot.table.row_of[node.id])
    assert _look(cache).node(node.id).gpu_used == 0


def test_the_whole_cluster_is_read_again_every_full_rebuild_period():
    make_node(cards=1)
    clock = _Clock()
    cache = SnapshotCache(clock=clock)
    _look(cache)
    clock.now += FULL_REBUILD_SECONDS / 2
    _look(cache)
    assert cache.full_builds == 1
    clock.now += FULL_REBUILD_SECONDS
    _look(cache)
    assert cache.full_builds == 2


def test_nodes_gone_without_a_trace_in_the_log_make_it_read_everything_again():
    kept, gone = make_node(cards=1), make_node(cards=1)
    cache = SnapshotCache()
    _look(cache)
    with connection.cursor() as cursor:
        # TRUNCATE and rolled-back test transactions leave no log rows; a disabled trigger stands in for them.
        cursor.execute("ALTER TABLE nodes_gpu DISABLE TRIGGER USER")
        cursor.execute("ALTER TABLE nodes_node DISABLE TRIGGER USER")
        try:
            cursor.execute("DELETE FROM nodes_gpu WHERE node_id = %s", [gone.id])
            cursor.execute("DELETE FROM nodes_node WHERE id = %s", [gone.id])
        finally:
            cursor.execute("ALTER TABLE nodes_gpu ENABLE TRIGGER USER")
            cursor.execute("ALTER TABLE nodes_node ENABLE TRIGGER USER")
    snapshot = _look(cache)
    assert cache.full_builds == 2
    assert [node.id for node in snapshot.nodes] == [kept.id]


def test_a_cycle_that_fails_half_way_leaves_nothing_of_it_in_the_cache():
    node = make_node(cards=2)
    cache = SnapshotCache()
    with pytest.raises(RuntimeError):
        with cache.snapshot(CONFIG) as snapshot:
            snapshot.node(node.id).gpu_used = 2
            raise RuntimeError("the cycle broke")
    assert _look(cache).node(node.id).gpu_used == 0
    assert cache.full_builds == 2


def test_a_stale_cache_costs_a_refused_bind_never_a_wrong_placement(tenant):
    node = make_node(cards=2)
    snapshot_cache.invalidate()
    _look(snapshot_cache)
    with connection.cursor() as cursor:
        # Someone takes both cards and the log misses it: the cache still believes the node is empty.
        cursor.execute("ALTER TABLE scheduling_task DISABLE TRIGGER USER")
        cursor.execute("ALTER TABLE nodes_node DISABLE TRIGGER USER")
        try:
            make_task(tenant=tenant, name="holder", gpu_required=2, status=lifecycle.RUNNING, node=node, gpus=[0, 1])
            Node.objects.filter(id=node.id).update(gpu_used=2)
        finally:
            cursor.execute("ALTER TABLE scheduling_task ENABLE TRIGGER USER")
            cursor.execute("ALTER TABLE nodes_node ENABLE TRIGGER USER")
    assert _look(snapshot_cache).node(node.id).gpu_used == 0
    task = make_task(tenant=tenant, name="late", gpu_required=1)

    run_cycle()

    task.refresh_from_db()
    assert task.status == lifecycle.PENDING
    assert Node.objects.get(id=node.id).gpu_used == 2
    # The refusal re-read the node: the cache knows now what the log did not tell it.
    assert _look(snapshot_cache).node(node.id).gpu_used == 2


def test_the_nodes_a_cycle_bound_to_as_placed_are_not_read_again_only_those_changed_since(tenant):
    nodes = [make_node(cards=4) for _ in range(3)]
    make_task(tenant=tenant, name="one", gpu_required=1)
    make_task(tenant=tenant, name="two", gpu_required=2, cpu_cores=4, memory_mb=8192)
    make_task(tenant=tenant, name="shard", gpu_memory_mb=4096)
    make_task(tenant=tenant, name="serve", type="inference", gpu_required=1)
    snapshot_cache.invalidate()
    assert run_cycle().bound == 4
    reread = snapshot_cache.nodes_reread

    snapshot = _look(snapshot_cache)
    assert snapshot_cache.nodes_reread == reread
    _assert_equals_a_fresh_build(snapshot)

    node_heartbeat_apply(node=nodes[0], cpu_percent=42.0, memory_used_mb=4096,
                         gpus=[card(index) for index in range(4)], labels={})
    snapshot = _look(snapshot_cache)
    assert snapshot_cache.nodes_reread == reread + 1
    _assert_equals_a_fresh_build(snapshot)


def test_a_node_is_read_again_unless_every_change_to_it_was_a_placement_committed_as_placed():
    from scheduling.framework.snapshot import NodeInfo
    from scheduling.framework.table import CHANGED_IN_MEMORY, PLACED, READ

    table = NodeTable([NodeInfo(id=node_id, name=f"n{node_id}") for node_id in range(1, 7)], CONFIG)
    row = table.row_of
    table.refresh_row(row[1], cause=PLACED)
    table.bound(1, transaction=10, as_placed=True)             # committed as placed
    table.refresh_row(row[2], cause=PLACED)
    table.bound(2, transaction=10, as_placed=False)            # committed otherwise (other cards, another shard)
    table.refresh_row(row[3], cause=PLACED)                    # never committed (refused, or the cycle stopped)
    table.refresh_row(row[4], cause=CHANGED_IN_MEMORY)         # a nominee's held cards, a defrag plan
    table.refresh_row(row[5], cause=CHANGED_IN_MEMORY)
    table.refresh_row(row[5], cause=READ)                      # read again since: the database's
    table.bound(6, transaction=11, as_placed=True)             # committed, but never placed in this table

    assert table.stale_ids() == {2, 3, 4, 6}
    assert table.own_transactions == {10, 11}
    table.forget_changes()
    assert (table.stale_ids(), table.own_transactions) == (set(), set())
