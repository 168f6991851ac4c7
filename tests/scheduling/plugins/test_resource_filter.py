import random

import numpy as np

from scheduling.framework.occupancy import Occupant, assume
from scheduling.framework.sharing import card_admits_tenant, has_compute_for
from scheduling.framework.snapshot import TenancyView
from scheduling.framework.table import NodeTable
from scheduling.plugins import resource_filter
from scheduling.plugins.resource_filter import ResourceFilter
from scheduling.plugins.resource_prefilter import INSUFFICIENT_GPU, INSUFFICIENT_GPU_MEMORY
from tests.scheduling.framework.builders import CONFIG, make_node, make_state, make_task, occupy

# 81920 MB cards: reserve = max(500, 10 %) = 8192 MB.


def check(task, node, tenancy=None):
    return ResourceFilter().filter(make_state(tenancy), task, node)


def test_whole_card_needs_enough_free_cards():
    node = make_node(cards=4)
    for card in node.cards[:3]:
        occupy(card, tenant_id=1)
    assert check(make_task(gpu_required=1), node).is_success
    assert check(make_task(gpu_required=2), node).reasons == (INSUFFICIENT_GPU,)


def test_a_shard_makes_a_card_not_free_for_whole_card_tasks():
    node = make_node(cards=1)
    occupy(node.cards[0], tenant_id=1, shard_mb=1000)
    assert check(make_task(gpu_required=1), node).reasons == (INSUFFICIENT_GPU,)


def test_cards_at_95_percent_memory_do_not_count():
    node = make_node(cards=2)
    node.cards[0].memory_used_mb = int(81920 * 0.95)
    assert check(make_task(gpu_required=1), node).is_success
    assert check(make_task(gpu_required=2), node).reasons == (INSUFFICIENT_GPU,)
    node.cards[1].memory_used_mb = 81000
    assert check(make_task(gpu_required=1), node).reasons == (resource_filter.CARDS_OVERLOADED,)


def test_whole_card_memory_condition_uses_free_memory_after_reserve():
    node = make_node(cards=2)
    node.cards[0].memory_used_mb = 40000  # 81920 − 8192 − 40000 = 33728 free
    assert check(make_task(gpu_required=2, gpu_memory_mb=33728), node).is_success
    status = check(make_task(gpu_required=2, gpu_memory_mb=33729), node)
    assert status.reasons == (INSUFFICIENT_GPU_MEMORY,)


def test_fractional_needs_one_card_with_room_after_reserve_and_shards():
    node = make_node(cards=1)
    occupy(node.cards[0], tenant_id=1, shard_mb=30000)  # 81920 − 8192 − 30000 = 43728
    assert check(make_task(gpu_memory_mb=43728), node).is_success
    assert check(make_task(gpu_memory_mb=43729), node).reasons == (INSUFFICIENT_GPU_MEMORY,)


def test_fractional_counts_reported_memory_when_larger_than_bookings():
    node = make_node(cards=1)
    node.cards[0].memory_used_mb = 50000
    occupy(node.cards[0], tenant_id=1, shard_mb=10000)  # reported use covers the shard: free 23728
    assert check(make_task(gpu_memory_mb=23728), node).is_success
    assert not check(make_task(gpu_memory_mb=23729), node).is_success


def test_fractional_never_joins_a_whole_card_occupant():
    node = make_node(cards=1)
    occupy(node.cards[0], tenant_id=1)
    assert check(make_task(gpu_memory_mb=100), node).reasons == (INSUFFICIENT_GPU_MEMORY,)


def test_fractional_tenant_boundary():
    node = make_node(cards=1)
    occupy(node.cards[0], tenant_id=2, shard_mb=1000)
    task = make_task(tenant_id=1, gpu_memory_mb=1000)
    assert check(task, node).reasons == (resource_filter.NO_TENANT_ELIGIBLE_CARD,)
    shared = TenancyView(groups_of={1: frozenset({10}), 2: frozenset({10})})
    assert check(task, node, shared).is_success


def test_fractional_prefers_any_open_card_over_the_tenant_check():
    node = make_node(cards=2)
    occupy(node.cards[0], tenant_id=2, shard_mb=1000)
    assert check(make_task(tenant_id=1, gpu_memory_mb=1000), node).is_success


def _shards(node, card_index, count, *, memory_mb, compute_percent=None):
    for _ in range(count):
        assume(node, Occupant(1, "training", (card_index,), node.cards[card_index].type, shard_memory_mb=memory_mb,
                              compute_percent=compute_percent))


def test_fractional_needs_the_compute_its_shard_takes_left_on_the_card():
    node = make_node(cards=1)
    # 33 shards of 2048 MB take ceil(2.5) = 3 % each: 99 % of the compute, 67584 MB of the 73728 after reserve.
    _shards(node, 0, 33, memory_mb=2048)
    assert node.cards[0].shard_compute_percent == 99
    assert check(make_task(gpu_memory_mb=2048), node).reasons == (resource_filter.INSUFFICIENT_GPU_COMPUTE,)
    assert check(make_task(gpu_memory_mb=2048, gpu_compute_percent=1), node).is_success
    assert check(make_task(gpu_memory_mb=8192), node).reasons == (INSUFFICIENT_GPU_MEMORY,)


def test_the_compute_rule_over_many_rows_is_the_card_by_card_rule():
    """The table's array form (`NodeTable.shard_room`) accepts exactly the cards `has_compute_for` accepts, for
    tasks with their own percent and tasks taking their memory's share, whatever the card's size."""
    rng = random.Random(3)
    nodes = []
    for _ in range(40):
        node = make_node(cards=4, memory_mb=rng.choice([16384, 32768, 81920]))
        for index in range(4):
            _shards(node, index, rng.randrange(0, 4), memory_mb=rng.choice([512, 1024, 3000]),
                    compute_percent=rng.choice([None, 10, 33]))
        nodes.append(node)
    table = NodeTable(nodes, CONFIG)
    rows = np.arange(len(nodes))
    for task in (make_task(gpu_memory_mb=1000), make_task(gpu_memory_mb=5000),
                 make_task(gpu_memory_mb=600, gpu_compute_percent=45)):
        room = table.shard_room(task, rows)
        expected = [[CONFIG.card_free_mb(card) >= task.gpu_memory_mb and has_compute_for(task, card)
                     for card in node.cards] for node in nodes]
        assert room.tolist() == expected


def test_tasks_asking_different_compute_are_judged_apart_in_one_cycle():
    """The compute figure is part of the filter's equivalence key: a task asking more than a card has left is not
    given the answer of one asking less."""
    plugin = ResourceFilter()
    node = make_node(cards=1)
    _shards(node, 0, 1, memory_mb=1024, compute_percent=70)
    table = NodeTable([node], CONFIG)
    modest, greedy = make_task(gpu_memory_mb=1024, gpu_compute_percent=30), make_task(gpu_memory_mb=1024,
                                                                                   gpu_compute_percent=31)
    assert plugin.filter_key(modest, table) != plugin.filter_key(greedy, table)
    rows = np.arange(1)
    assert plugin.filter_rows(make_state(), modest, table, rows).tolist() == [0]
    assert plugin.filter_rows(make_state(), greedy, table, rows).tolist() != [0]


def test_task_without_gpus_passes():
    node = make_node(cards=1)
    occupy(node.cards[0], tenant_id=2)
    assert check(make_task(cpu_cores=2), node).is_success


def test_the_tenant_rule_over_many_nodes_is_the_card_by_card_rule():
    """The array form of the shard's tenant check (one occupant tenant per card, the usual case) rejects exactly
    the nodes whose candidate cards `card_admits_tenant` refuses one by one, with several occupants and share
    groups, and cards occupied by nobody known."""
    rng = random.Random(5)
    nodes = []
    for _ in range(300):
        node = make_node(cards=rng.choice((1, 2, 4)), memory_mb=40960)
        for card in node.cards:
            for _ in range(rng.choice((0, 1, 1, 2, 3))):
                occupy(card, tenant_id=rng.randint(1, 5), shard_mb=rng.choice((1024, 4096)))
            if rng.random() < 0.05:
                card.shard_tasks += 1   # an occupant whose tenant the snapshot does not know
        nodes.append(node)
    tenancy = TenancyView(groups_of={1: frozenset({1}), 2: frozenset({1, 2}), 4: frozenset({2})})
    table = NodeTable(nodes, CONFIG)
    rows = np.arange(table.size)

    for tenant_id in range(1, 7):
        task = make_task(tenant_id=tenant_id, gpu_memory_mb=4096)
        codes = ResourceFilter().filter_rows(make_state(tenancy), task, table, rows)
        for row, node in enumerate(nodes):
            candidates = [card for card in node.cards if card.whole_card_tasks == 0
                          and CONFIG.card_free_mb(card) >= task.gpu_memory_mb]
            refused = bool(candidates) and all(card.active_tasks for card in candidates) and not any(
                card_admits_tenant(card, tenant_id, tenancy) for card in candidates)
            assert (codes[row] == 4) == refused, (tenant_id, node.name)
        assert 0 < int((codes == 4).sum()) < table.size
