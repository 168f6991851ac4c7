"""The defrag plan without a database (design §16.3): the fewest moves, each to a node where the task fits now."""

import pytest

from scheduling.framework.framework import Framework
from scheduling.framework.occupancy import Occupant, assume
from scheduling.framework.registry import validate_extra
from scheduling.framework.snapshot import NodeInfo
from scheduling.plugins import build_plugin_set, default_registry
from scheduling.preemption.defrag_planner import Mover, plan_defrag
from tests.scheduling.framework.builders import CONFIG, make_node, make_snapshot, make_task


def framework() -> Framework:
    return Framework(build_plugin_set([], default_registry(extra_plugins=())), CONFIG)


def place(node: NodeInfo, cards: list[int], **fields) -> Mover:
    task = make_task(gpu_type="nvidia", gpu_required=len(cards), preemptible=True, **fields)
    occupant = Occupant.of_task(task, cards)
    assume(node, occupant)
    return Mover(task, node.id, occupant)


def usage(snapshot) -> list[tuple[int, list[int]]]:
    return [(node.gpu_used, [card.active_tasks for card in node.cards]) for node in snapshot.nodes]


@pytest.fixture
def fragmented():
    """Three 8-card nodes, 10 cards free in all but at most 5 on one. a: a 4-card and a 2-card task (2 free);
    b: three 1-card tasks (5 free); c: 6 cards of a task that may not move (2 free). For an 8-card job, emptying a
    takes 2 moves (the 4-card task to b, the 2-card one to c), emptying b 3."""
    a, b, c = make_node(name="a"), make_node(name="b"), make_node(name="c")
    movers = [place(a, [0, 1, 2, 3]), place(a, [4, 5])]
    movers += [place(b, [index]) for index in range(3)]
    place(c, list(range(6)))
    return make_snapshot(a, b, c), movers


def test_the_fewest_moves_that_each_fit_elsewhere(fragmented):
    snapshot, movers = fragmented
    job = make_task(gpu_type="nvidia", gpu_required=8)
    before = usage(snapshot)

    plan = plan_defrag(job, snapshot, movers, framework(), max_moves=4)

    assert plan is not None and plan.node.name == "a"
    assert sorted((move.task.gpu_required, move.to_node.name) for move in plan.moves) == [(2, "c"), (4, "b")]
    assert usage(snapshot) == before   # planning leaves the snapshot as it was


def test_a_mover_without_a_target_is_never_planned(fragmented):
    snapshot, movers = fragmented
    job = make_task(gpu_type="nvidia", gpu_required=8)
    # c full: a's 2-card task has nowhere to go but b, which then has no room for the 4-card one; b's three 1-card
    # tasks have 2 free cards on a.
    place(snapshot.nodes[2], [6, 7])
    snapshot.table = None

    assert plan_defrag(job, snapshot, movers, framework(), max_moves=4) is None


def test_the_budget_caps_the_moves(fragmented):
    snapshot, movers = fragmented
    job = make_task(gpu_type="nvidia", gpu_required=8)
    assert plan_defrag(job, snapshot, movers, framework(), max_moves=1) is None


def test_among_single_moves_the_one_moving_fewest_cards():
    a, b = make_node(name="a"), make_node(name="b")
    movers = [place(a, [0, 1]), place(a, [2])]
    place(b, list(range(6)))
    job = make_task(gpu_type="nvidia", gpu_required=6)
    plan = plan_defrag(job, make_snapshot(a, b), movers, framework(), max_moves=4)
    assert plan is not None and [move.task.gpu_required for move in plan.moves] == [1]


@pytest.mark.parametrize("extra", [{"max_moves": 0}, {"max_moves": "4"}, {"moves_per_hour": -1},
                                   {"moves_per_hour": True}, {"colour": 1}])
def test_bad_settings_are_refused(extra):
    with pytest.raises(ValueError):
        validate_extra("defrag", extra, default_registry(extra_plugins=()))
