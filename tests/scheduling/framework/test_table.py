"""The node table's card columns: built for every card at once, they must equal the per-node refresh."""

import numpy as np

from scheduling.framework.table import _CARD_COLUMNS, NodeTable
from tests.scheduling.framework.builders import CONFIG, make_node, occupy


def test_card_columns_built_at_once_equal_each_row_refreshed_alone():
    busy = make_node(name="busy", cards=4)
    occupy(busy.cards[0], 1)
    occupy(busy.cards[1], 2, shard_mb=4096)
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
