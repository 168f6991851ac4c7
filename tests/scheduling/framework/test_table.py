"""The node table: columns built for every node at once must equal those a refresh of some rows leaves."""

import numpy as np
import pytest

from scheduling.framework.table import _CARD_COLUMNS, _NODE_COLUMNS, PLACED, READ, NodeTable
from tests.scheduling.framework.builders import CONFIG, make_node, occupy


def test_card_columns_built_at_once_equal_each_row_refreshed_alone():
    busy = make_node(name="busy", cards=4)
    occupy(busy.cards[0], 1)
    occupy(busy.cards[1], 2, shard_mb=4096)
    busy.cards[1].shard_compute_percent = 5
    busy.cards[2].memory_used_mb = 80000  # over the memory threshold
    unreported = make_node(name="unreported", cards=2)
    unreported.cards[0].memory_total_mb = 0
    nodes = [busy, unreported, make_node(name="small", cards=1, memory_mb=16384), make_node(name="cpu", cards=0)]
    table = NodeTable(nodes, CONFIG)
    built = {name: getattr(table, name).copy() for name, _ in _CARD_COLUMNS}

    for row in range(table.size):
        table.refresh_row(row)

    for name, _ in _CARD_COLUMNS:
        assert np.array_equal(built[name], getattr(table, name)), name
    assert built["card_free"][0].tolist() == [False, False, True, True]
    assert built["card_ok"][0].tolist() == [True, True, False, True]
    assert built["card_compute_left"][0].tolist() == [100, 95, 100, 100]


# Every column a rule reads: the node and card columns and what `_derive` combines from them.
_DERIVED = ("known_usage", "usage_terms", "has_cards", "card_divisor", "card_usable", "card_shardable", "card_open",
            "usable_cards", "cards_all_overloaded", "max_card_capacity_mb")


def _columns(table: NodeTable) -> dict[str, np.ndarray]:
    names = [name for name, _ in _NODE_COLUMNS] + [name for name, _ in _CARD_COLUMNS] + list(_DERIVED)
    return {name: getattr(table, name).copy() for name in names}


def _mixed_nodes():
    busy = make_node(name="busy", cards=4, cpu_percent=35.5, memory_used_mb=100_000)
    occupy(busy.cards[0], 1)
    occupy(busy.cards[1], 2, shard_mb=4096)
    busy.cards[2].memory_used_mb = 80000
    overloaded = make_node(name="overloaded", cards=2)
    for card in overloaded.cards:
        card.memory_used_mb = 81000
    unsized = make_node(name="unsized", cards=8, memory_gb=0)
    return [busy, overloaded, unsized, make_node(name="small", cards=1, memory_mb=16384), make_node(name="cpu", cards=0)]


@pytest.mark.parametrize("one_by_one", [True, False], ids=["each-row-alone", "all-rows-at-once"])
def test_refreshed_rows_equal_a_table_built_afresh(one_by_one):
    """A refresh (one row, as after each in-memory bind, or many, as after a re-read) leaves every column as a
    table built from the changed nodes has it."""
    nodes = _mixed_nodes()
    table = NodeTable(nodes, CONFIG)
    nodes[0].cards[3].whole_card_tasks = 1
    nodes[0].gpu_used = 2
    nodes[2].cards[0].shard_tasks, nodes[2].cards[0].shard_memory_mb = 1, 70000
    nodes[2].cards[0].shard_compute_percent = 86
    nodes[3].cpu_percent, nodes[3].memory_used_mb = 80.0, 1024
    expected = _columns(NodeTable(nodes, CONFIG))

    if one_by_one:
        for row in range(table.size):
            table.refresh_row(row)
    else:
        table.refresh_rows(list(range(table.size)))

    refreshed = _columns(table)
    for name, values in expected.items():
        assert refreshed[name].dtype == values.dtype, name
        assert np.array_equal(refreshed[name], values, equal_nan=values.dtype.kind == "f"), name


def test_a_placement_changes_a_rows_usage_and_a_label_change_its_shape():
    """Rules that ignore usage re-read only the rows in `reshaped_rows`: a placement applied in memory is logged as
    a change of usage alone, a node re-read with another label as a change of shape too."""
    first, second = make_node(cards=2), make_node(cards=2)
    table = NodeTable([first, second], CONFIG)

    occupy(first.cards[0], 1)
    table.refresh_row(0, cause=PLACED)
    second.labels = {**second.labels, "zone-class": "gold"}
    table.refresh_row(1, cause=READ)

    assert table.changed_rows == [0, 1]
    assert table.reshaped_rows == [1]
