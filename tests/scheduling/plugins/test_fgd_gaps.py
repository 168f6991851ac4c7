"""fgd's card-gap look-ahead (`scheduling/plugins/fgd/gaps.py`, design §15.9), worked out by hand on 1000 MB cards."""

import numpy as np
import pytest

from scheduling.framework.interfaces import CycleState
from scheduling.framework.snapshot import CardInfo, NodeInfo, SchedulerConfig, TaskInfo
from scheduling.framework.table import NodeTable
from scheduling.plugins.fgd import Fgd
from scheduling.plugins.fgd.gaps import STEPS, gap_values
from scheduling.plugins.fgd.workload import Shape, TargetWorkload

CONFIG = SchedulerConfig(gpu_reserve_fixed_mb=0, gpu_reserve_percent=0)


def node(node_id: int, shards: list[int]) -> NodeInfo:
    cards = [CardInfo(index=index, type="nvidia", model="T4", memory_total_mb=1000) for index in range(len(shards))]
    for card, booked in zip(cards, shards):
        if booked:
            card.shard_tasks, card.shard_memory_mb = 1, booked
    return NodeInfo(id=node_id, name=f"n{node_id}", gpu_type="nvidia", gpu_total=len(cards), cpu_cores=64,
                    cards=cards)


def test_a_gaps_value_is_what_the_tasks_that_may_still_fill_it_finally_leave():
    # Whole card (p 0.5) and a 500 MB shard (p 0.5), horizon 50 (θ = 0.02), in steps of 10 MB:
    # below 50 steps nothing fits: V(g) = g. V(50) = (0.02·50 + 0.5·V(0)) / 0.52 = 1.923;
    # V(60) = (0.02·60 + 0.5·V(10)) / 0.52 = 11.923; an idle card takes either: V(100) = (2 + 0.5·V(50)) / 1.02.
    workload = TargetWorkload((Shape(cards=1), Shape(shard_mb=500)), (0.5, 0.5))
    value = gap_values(workload, 1000, 50) * STEPS
    assert value[0] == 0 and value[30] == pytest.approx(30)
    assert value[50] == pytest.approx(1 / 0.52)
    assert value[60] == pytest.approx(6.2 / 0.52)
    assert value[100] == pytest.approx((2 + 0.5 / 0.52) / 1.02)


# 320, 230 and 220 MB shards and whole cards, alike popular.
WORKLOAD = TargetWorkload((Shape(shard_mb=320, cpu=1), Shape(shard_mb=230, cpu=1), Shape(shard_mb=220, cpu=1),
                           Shape(cards=1, cpu=1)), (0.25, 0.25, 0.25, 0.25))
SHARD = TaskInfo(id=1, tenant_id=1, gpu_memory_mb=230, cpu_cores=1)


def test_a_shard_leaves_the_gap_a_later_task_fills_where_the_paper_leaves_one_none_fills():
    # Cards with 350 MB and 450 MB free. The 230 MB shard on the first leaves 120 MB, which no shape fits; on the
    # second it leaves 220 MB, a 220 MB shard's place (and the 350 MB stays a 320 MB one's). One task ahead (the
    # paper's F) 120 MB left looks the smaller fragment (F 0.2325 against 0.2525); with the gaps' values
    # (V(12) − V(35) = +2.0 steps against V(22) − V(45) = −4.7) fgd takes the second card.
    two_gaps = node(1, [650, 550])
    state = CycleState(CONFIG)
    assert Fgd(lambda: WORKLOAD).reserve(state, SHARD, two_gaps) == [0]
    assert Fgd(lambda: WORKLOAD, gap_weight=3, gap_horizon=50).reserve(state, SHARD, two_gaps) == [1]


def test_the_node_score_follows_the_best_card_with_its_gap_growth():
    # The same gaps on two nodes: the node whose card the shard fills to a gap that a later task fills wins.
    table = NodeTable([node(1, [650]), node(2, [550])], CONFIG)
    rows = np.arange(2)
    paper, looking_ahead = Fgd(lambda: WORKLOAD), Fgd(lambda: WORKLOAD, gap_weight=3)
    assert paper.growth(table, SHARD, rows)[0] < paper.growth(table, SHARD, rows)[1]
    assert looking_ahead.growth(table, SHARD, rows)[1] < looking_ahead.growth(table, SHARD, rows)[0]
    scores = looking_ahead.score_rows(None, SHARD, table, rows)
    assert scores[1] > scores[0]


def test_a_shard_with_no_node_left_to_score_gets_no_growth():
    table = NodeTable([node(1, [650])], CONFIG)
    growth = Fgd(lambda: WORKLOAD, gap_weight=3).growth(table, SHARD, np.zeros(0, np.int64))
    assert growth.shape == (0,)
