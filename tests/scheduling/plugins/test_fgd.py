"""fgd against the paper's definition (Weng et al., ATC'23 §4), on nodes small enough to work out by hand.

Cards hold 1000 MB and the config has no reserve, so a card's idle share is (1000 − booked shard MB) / 1000.
The workload of the examples: A = one whole card and 1 CPU (p = 0.5), B = a 500 MB shard and 1 CPU (p = 0.5).
"""

import math
import random

import numpy as np
import pytest

from scheduling.framework.interfaces import CycleState
from scheduling.framework.snapshot import CardInfo, ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo
from scheduling.framework.table import NodeTable
from scheduling.plugins.fgd import Fgd
from scheduling.plugins.fgd import fragmentation as frag
from scheduling.plugins.fgd.workload import Shape, TargetWorkload

CONFIG = SchedulerConfig(gpu_reserve_fixed_mb=0, gpu_reserve_percent=0)
WHOLE = Shape(cards=1, cpu=1)
SHARD = Shape(shard_mb=500, cpu=1)
WORKLOAD = TargetWorkload((WHOLE, SHARD), (0.5, 0.5))


def node(node_id: int, shards: list[int], *, whole: tuple[int, ...] = (), cpu: int = 8, model: str = "T4") -> NodeInfo:
    cards = [CardInfo(index=index, type="nvidia", model=model, memory_total_mb=1000) for index in range(len(shards))]
    for card, booked in zip(cards, shards):
        if booked:
            card.shard_tasks, card.shard_memory_mb = 1, booked
    for index in whole:
        cards[index].whole_card_tasks = 1
    return NodeInfo(id=node_id, name=f"n{node_id}", gpu_type="nvidia", gpu_total=len(cards), cpu_cores=cpu,
                    cards=cards)


def fragmentation_of(*nodes: NodeInfo, workload: TargetWorkload = WORKLOAD) -> list[float]:
    table = NodeTable(list(nodes), CONFIG)
    rows = np.arange(table.size)
    cores = np.array([float(n.cpu_cores) for n in nodes])
    return frag.fragmentation(frag.table_state(table, rows, cores), rows, frag.ShapeArrays(workload, table)).tolist()


def test_fragmentation_of_hand_worked_nodes():
    # Example 1: cards idle [0.4, 1.0]. A fits (card 1); card 0 is too small for it: F(A) = 0.4.
    # B fits (card 1 has 1000 MB ≥ 500); card 0's 400 MB is too little: F(B) = 0.4. F = 0.5·0.4 + 0.5·0.4 = 0.4.
    # Example 2: cards idle [0.4, 0.8]. No idle card, A cannot be placed: F(A) = all idle = 1.2.
    # B fits on card 1 (800 MB); card 0 stays a fragment: F(B) = 0.4. F = 0.5·1.2 + 0.5·0.4 = 0.8.
    # An empty node has no fragment; one with 0.5 CPU left cannot host either shape: F = its 2 idle cards.
    values = fragmentation_of(node(1, [600, 0]), node(2, [600, 200]), node(3, [0, 0]), node(4, [0, 0], cpu=0))
    assert values == pytest.approx([0.4, 0.8, 0.0, 2.0])


def test_a_task_without_gpu_sees_every_idle_card_as_fragment_and_a_card_held_whole_counts_nothing():
    cpu_only = TargetWorkload((Shape(cpu=1),), (1.0,))
    assert fragmentation_of(node(1, [600, 0], whole=()), node(2, [0, 0], whole=(0,)), workload=cpu_only) \
        == pytest.approx([1.4, 1.0])


def test_shard_score_is_the_sigmoid_of_the_best_cards_growth_and_the_card_choice_follows_it():
    # A 300 MB shard on example 1 ([0.4, 1.0]):
    #   on card 0 → [0.1, 1.0]: F(A) = 0.1, F(B) = 0.1, F = 0.1, growth −0.3;
    #   on card 1 → [0.4, 0.7]: A has no idle card, F(A) = 1.1; B fits on card 1, F(B) = 0.4; F = 0.75, growth +0.35.
    # On the empty node ([1, 1]): either card → [0.7, 1.0]: A fits on the idle card, F(A) = 0.7; B fits on both,
    # F(B) = 0; F = 0.35, growth +0.35.
    plugin = Fgd(lambda: WORKLOAD)
    one, empty = node(1, [600, 0]), node(2, [0, 0])
    table = NodeTable([one, empty], CONFIG)
    task = TaskInfo(id=1, tenant_id=1, gpu_memory_mb=300, cpu_cores=1)
    assert plugin.growth(table, task, np.arange(2)).tolist() == pytest.approx([-0.3, 0.35])
    scores = plugin.score_rows(None, task, table, np.arange(2))
    assert scores.tolist() == pytest.approx([100 / (1 + math.exp(-0.3)), 100 / (1 + math.exp(0.35))])
    assert plugin.reserve(CycleState(CONFIG), task, one) == [0]


def test_a_card_without_the_compute_the_shard_takes_is_never_its_card():
    """The same 300 MB shard on example 1, with card 0's shard holding all of its compute (design §8): card 0 is
    out (bind would refuse it), so the growth is card 1's and Reserve takes card 1."""
    plugin = Fgd(lambda: WORKLOAD)
    one = node(1, [600, 0])
    one.cards[0].shard_compute_percent = 100
    table = NodeTable([one, node(2, [600, 0])], CONFIG)
    task = TaskInfo(id=1, tenant_id=1, gpu_memory_mb=300, cpu_cores=1)
    assert plugin.growth(table, task, np.arange(2)).tolist() == pytest.approx([0.35, -0.3])
    assert plugin.reserve(CycleState(CONFIG), task, one) == [1]
    # Enough rows that equal states are computed once: a card's compute left tells otherwise equal rows apart.
    many = [node(index, [600, 0]) for index in range(3, 43)]
    for squeezed in many[::2]:
        squeezed.cards[0].shard_compute_percent = 100
    growth = Fgd(lambda: WORKLOAD).growth(NodeTable(many, CONFIG), task, np.arange(len(many)))
    assert growth.tolist() == pytest.approx([0.35, -0.3] * 20)


def test_whole_card_growth_takes_idle_cards_only():
    # One whole card on example 1 takes card 1 → [0.4, 0]: A cannot be placed, F(A) = 0.4; B neither (no card with
    # 500 MB), F(B) = 0.4; F = 0.4, growth 0. On the empty node → [0, 1]: nothing is a fragment, growth 0 too;
    # with 1 CPU left after the task, neither shape fits the empty node any more: F = 1, growth +1.
    plugin = Fgd(lambda: WORKLOAD)
    table = NodeTable([node(1, [600, 0]), node(2, [0, 0]), node(3, [0, 0], cpu=2)], CONFIG)
    task = TaskInfo(id=1, tenant_id=1, gpu_required=1, cpu_cores=1.5)
    assert plugin.growth(table, task, np.arange(3)).tolist() == pytest.approx([0.0, 0.0, 1.0])


def test_model_constrained_shapes_count_other_models_cards_as_fragment():
    t4_only = TargetWorkload((Shape(cards=1, models="T4"),), (1.0,))
    assert fragmentation_of(node(1, [0, 0], model="T4"), node(2, [0, 0], model="P100"), workload=t4_only) \
        == pytest.approx([0.0, 2.0])


def test_shapes_sharing_their_cards_but_not_their_cpu_are_each_counted_by_their_own_cpu():
    # The cards of shapes that differ only in CPU are worked out once; each shape still fits or not by its own CPU.
    shapes = (Shape(cards=1, cpu=1), Shape(cards=1, cpu=6), Shape(shard_mb=500, cpu=1), Shape(shard_mb=500, cpu=6),
              Shape(cards=1, cpu=1, models="T4"), Shape(cards=1, cpu=6, models="T4"), Shape(cpu=1))
    workload = TargetWorkload(shapes, (0.1, 0.2, 0.15, 0.15, 0.1, 0.2, 0.1))
    nodes = (node(1, [600, 0], cpu=8), node(2, [600, 200], cpu=4), node(3, [0, 0], model="P100", cpu=8),
             node(4, [300, 0, 0], whole=(2,), cpu=4))
    one_by_one = np.array([fragmentation_of(*nodes, workload=TargetWorkload((shape,), (1.0,))) for shape in shapes])
    assert fragmentation_of(*nodes, workload=workload) == pytest.approx(workload.weights() @ one_by_one)
    # Node 2, idle [0.4, 0.8] with 4 CPU: no whole card (1.2 for the four whole shapes and the CPU-only one), the
    # 1-CPU shard fits card 1 (0.4 left over), the 6-CPU one does not fit at all (1.2).
    assert fragmentation_of(*nodes, workload=workload)[1] == pytest.approx(1.2 * 0.7 + 0.4 * 0.15 + 1.2 * 0.15)


def test_shards_of_one_size_on_cards_of_other_types_are_each_counted_on_their_own_cards():
    """Shard shapes of one size that differ in GPU type or model share that size's room test but not their cards;
    with whole-card shapes of those types among them, each node's F is still the popularity-weighted F of each
    shape alone, on one node state or many (the after-states of a shard on each card)."""
    shapes = (Shape(shard_mb=500, cpu=1), Shape(shard_mb=500, cpu=1, models="T4"),
              Shape(shard_mb=500, cpu=1, gpu_type="ascend"), Shape(shard_mb=300, cpu=2, models="P100"),
              Shape(cards=1, cpu=1, models="P100"), Shape(cards=2, cpu=1), Shape(cpu=4))
    workload = TargetWorkload(shapes, (0.2, 0.15, 0.1, 0.15, 0.15, 0.15, 0.1))
    nodes = (node(1, [600, 0], cpu=8), node(2, [600, 200], cpu=4, model="P100"), node(3, [0, 0, 0], model="P100"),
             node(4, [300, 0, 0], whole=(2,), cpu=2))
    one_by_one = np.array([fragmentation_of(*nodes, workload=TargetWorkload((shape,), (1.0,))) for shape in shapes])
    assert fragmentation_of(*nodes, workload=workload) == pytest.approx(workload.weights() @ one_by_one)
    table = NodeTable(list(nodes), CONFIG)
    rows = np.arange(table.size)
    cores = np.array([float(each.cpu_cores) for each in nodes])
    after = frag.after_shards(frag.table_state(table, rows, cores), table.card_capacity_mb[rows], 300, 1.0)
    every_card = np.repeat(rows, table.width)
    alone = np.array([frag.fragmentation(after, every_card, frag.ShapeArrays(TargetWorkload((shape,), (1.0,)), table))
                      for shape in shapes])
    assert frag.fragmentation(after, every_card, frag.ShapeArrays(workload, table)).tolist() \
        == pytest.approx((workload.weights() @ alone).tolist())


def test_a_shape_asking_more_cards_than_a_node_has_counts_every_idle_card_there_however_many_cards_nodes_have():
    # Two idle cards, a 3-card shape: it never fits, F = 2. A node of 300 cards (card counts no longer fit a byte):
    # a 256-card shape fits on its idle cards (F = 0) and not once 45 of them hold shards of 600 MB (F = all idle).
    three_cards = TargetWorkload((Shape(cards=3, cpu=1),), (1.0,))
    assert fragmentation_of(node(1, [0, 0]), workload=three_cards) == pytest.approx([2.0])
    many_cards = TargetWorkload((Shape(cards=256, cpu=1),), (1.0,))
    assert fragmentation_of(node(1, [0] * 300, cpu=64), node(2, [600] * 45 + [0] * 255, cpu=64),
                            workload=many_cards) == pytest.approx([0.0, 255 + 45 * 0.4])


def _random_nodes(rng: random.Random, count: int) -> list[NodeInfo]:
    made = []
    for node_id in range(1, count + 1):
        width = rng.choice((2, 4, 8))
        shards = [rng.choice((0, 0, 250, 500, 600, 900)) for _ in range(width)]
        whole = tuple(index for index in range(width) if not shards[index] and rng.random() < 0.3)
        made.append(node(node_id, shards, whole=whole, cpu=rng.choice((1, 2, 4, 6, 8, 16)),
                         model=rng.choice(("T4", "P100"))))
    return made


def _random_workload(rng: random.Random) -> TargetWorkload:
    shapes = sorted({Shape(cards=rng.choice((1, 2, 3, 9)), cpu=rng.choice((0.5, 1, 2, 4, 6, 8)),
                           models=rng.choice(("", "", "T4", "P100"))) for _ in range(12)}
                    | {Shape(shard_mb=rng.choice((100, 250, 500)), cpu=rng.choice((1, 2, 4, 6)),
                             models=rng.choice(("", "T4"))) for _ in range(12)}
                    | {Shape(cpu=rng.choice((1, 4)))}, key=repr)
    popularity = [rng.random() for _ in shapes]
    return TargetWorkload(tuple(shapes), tuple(share / sum(popularity) for share in popularity))


def test_fragmentation_is_the_popularity_weighted_fragment_of_each_shape_by_its_definition():
    """Against the paper's F_n(m) worked out shape by shape (the usable cards the shape's size and model allow, its
    card count and CPU, the free CPU exactly at a shape's CPU included), on random nodes and workloads."""
    rng = random.Random(7)
    for _ in range(20):
        nodes, workload = _random_nodes(rng, 12), _random_workload(rng)
        table = NodeTable(nodes, CONFIG)
        rows = np.arange(table.size)
        state = frag.table_state(table, rows, np.array([float(each.cpu_cores) for each in nodes]))
        expected = []
        for row, each in enumerate(nodes):
            idle = state.idle[row]
            value = 0.0
            for shape, share in zip(workload.shapes, workload.popularity):
                allowed = frag.card_mask(table, shape.gpu_type, shape.models)[row]
                usable = allowed & (state.whole_ok[row] if shape.cards else
                                    state.share_ok[row] & (state.free_mb[row] >= shape.shard_mb))
                fits = (shape.uses_gpu and usable.sum() >= max(shape.cards, 1)
                        and state.cpu_free[row] >= shape.cpu - frag.CPU_TOLERANCE)
                value += share * (idle.sum() - (idle[usable].sum() if fits else 0.0))
            expected.append(value)
        assert frag.fragmentation(state, rows, frag.ShapeArrays(workload, table)).tolist() \
            == pytest.approx(expected, abs=1e-12)


def test_a_states_fragmentation_does_not_depend_on_the_states_beside_it():
    """Exactly, to the last bit: the caches compute a state in batches of whatever rows went stale, and a shard's
    card is the one of least growth, ties to the lowest index, so cards in equal states must measure equal."""
    rng = random.Random(11)
    nodes, workload = _random_nodes(rng, 30), _random_workload(rng)
    table = NodeTable(nodes, CONFIG)
    rows = np.arange(table.size)
    cores = np.array([float(each.cpu_cores) for each in nodes])
    after = frag.after_shards(frag.table_state(table, rows, cores), table.card_capacity_mb[rows], 250, 1.0)
    every_card = np.repeat(rows, table.width)
    shapes = frag.ShapeArrays(workload, table, cpu_weight=1.0)
    together = frag.fragmentation(after, every_card, shapes)
    for start in range(0, len(every_card), 7):
        batch = np.arange(start, min(start + rng.choice((1, 3, 7)), len(every_card)))
        assert frag.fragmentation(after.take(batch), every_card[batch], shapes).tolist() == together[batch].tolist()
    # Four idle cards alike and one 250 MB shard: on whichever card it goes, the node is left in the same state.
    alike = NodeTable([node(1, [500, 0, 0, 0, 0]), *nodes], CONFIG)
    state = frag.table_state(alike, np.array([0]), np.array([8.0]))
    shard_on_each = frag.after_shards(state, alike.card_capacity_mb[:1], 250, 1.0)
    values = frag.fragmentation(shard_on_each, np.zeros(alike.width, np.intp), frag.ShapeArrays(workload, alike))
    assert len(set(values[1:5].tolist())) == 1


def _rows_given(monkeypatch, name: str) -> list[list[int]]:
    """The rows (second argument) of each call of `fragmentation.<name>` from now on, as lists."""
    given = []
    original = getattr(frag, name)

    def recording(first, rows, *rest):
        given.append(rows.tolist())
        return original(first, rows, *rest)

    monkeypatch.setattr(frag, name, recording)
    return given


def test_growth_is_recomputed_only_for_rows_a_bind_changed():
    from scheduling.framework.occupancy import apply_bind

    plugin = Fgd(lambda: WORKLOAD)
    nodes = [node(1, [600, 0]), node(2, [0, 0])]
    snapshot = ClusterSnapshot(nodes=nodes)
    from scheduling.framework.table import table_for

    table = table_for(snapshot, CONFIG)
    task = TaskInfo(id=1, tenant_id=1, gpu_memory_mb=300, cpu_cores=1)
    before = plugin.growth(table, task, np.arange(2)).tolist()
    apply_bind(snapshot, task, nodes[0], [0])        # card 0 → 100 MB idle
    after = plugin.growth(table, task, np.arange(2)).tolist()
    # Node 1 now has [0.1, 1.0]: the shard can only go on card 1 → [0.1, 0.7]: F(A) = 0.8, F(B) = 0.1, F = 0.45;
    # before it F = 0.1, so +0.35. Node 2 did not move.
    assert before == pytest.approx([-0.3, 0.35])
    assert after == pytest.approx([0.35, 0.35])


def test_a_changed_row_is_measured_as_it_is_and_after_the_task_in_one_evaluation(monkeypatch):
    """After a bind, the first shape to score the row measures its F as it is (kept for every shape) together with its
    own after-states: one evaluation, not two; the next shape finds the row's F kept."""
    from scheduling.framework.occupancy import apply_bind
    from scheduling.framework.table import table_for

    plugin = Fgd(lambda: WORKLOAD)
    nodes = [node(1, [600, 0]), node(2, [0, 0])]
    snapshot = ClusterSnapshot(nodes=nodes)
    table = table_for(snapshot, CONFIG)
    shard = TaskInfo(id=1, tenant_id=1, gpu_memory_mb=300, cpu_cores=1)
    whole = TaskInfo(id=2, tenant_id=1, gpu_required=1, cpu_cores=1)
    plugin.growth(table, shard, np.arange(2))
    plugin.growth(table, whole, np.arange(2))
    apply_bind(snapshot, shard, nodes[0], [0])
    evaluated = []
    evaluate = frag.fragmentation_of
    monkeypatch.setattr(frag, "fragmentation_of", lambda states, shapes: evaluated.append(len(states.idle)) or
                        evaluate(states, shapes))
    after_bind = plugin.growth(table, whole, np.arange(2)).tolist()
    shard_after_bind = plugin.growth(table, shard, np.arange(2)).tolist()

    assert evaluated == [2, 1]     # row 0 as it is + its after-state; then the shard on the one card left
    monkeypatch.undo()
    afresh = Fgd(lambda: WORKLOAD)
    assert after_bind == afresh.growth(NodeTable(nodes, CONFIG), whole, np.arange(2)).tolist()
    assert shard_after_bind == afresh.growth(NodeTable(nodes, CONFIG), shard, np.arange(2)).tolist()


def test_a_whole_card_tasks_growth_is_f_after_its_cards_are_taken_less_f_now_with_the_cards_measured_once(monkeypatch):
    """A whole-card (or CPU-only) task's after-states are its rows' usable cards less those it takes: the cards are
    measured once, and the growth is that of the after-states built card by card (`fragmentation` of each)."""
    nodes = [node(1, [600, 0, 0]), node(2, [0, 0, 0], whole=(1,)), node(3, [0, 200, 0], cpu=3), node(4, [0, 0, 0])]
    table = NodeTable(nodes, CONFIG)
    rows = np.arange(table.size)
    cores = np.array([float(n.cpu_cores) for n in nodes])
    shapes = frag.ShapeArrays(WORKLOAD, table)
    now = frag.table_state(table, rows, cores)
    for task, taken in (
        (TaskInfo(id=1, tenant_id=1, gpu_required=2, cpu_cores=2), [[0, 1, 1], [1, 0, 1], [1, 0, 1], [1, 1, 0]]),
        (TaskInfo(id=2, tenant_id=1, cpu_cores=3), [[0, 0, 0]] * 4),
    ):
        taken = np.array(taken, bool)
        after = frag.CardState(np.where(taken, 0.0, now.idle), np.where(taken, 0.0, now.free_mb),
                               now.whole_ok & ~taken, now.share_ok & ~taken, now.cpu_free - task.cpu_cores)
        expected = frag.fragmentation(after, rows, shapes) - frag.fragmentation(now, rows, shapes)
        measured = []
        measure = frag.measured
        monkeypatch.setattr(frag, "measured", lambda *given: measured.append(len(given[1])) or measure(*given))

        assert Fgd(lambda: WORKLOAD).growth(table, task, rows).tolist() == expected.tolist()
        assert measured == [4]
        monkeypatch.undo()


def test_a_shards_gap_growth_is_computed_for_the_rows_a_bind_changed_once_for_every_shape_of_its_size(monkeypatch):
    from scheduling.framework.occupancy import apply_bind
    from scheduling.framework.table import table_for
    from scheduling.plugins.fgd.gaps import GapTable

    plugin = Fgd(lambda: WORKLOAD, gap_weight=3.0)
    nodes = [node(1, [600, 0]), node(2, [0, 0]), node(3, [200, 0])]
    snapshot = ClusterSnapshot(nodes=nodes)
    table = table_for(snapshot, CONFIG)
    one_cpu = TaskInfo(id=1, tenant_id=1, gpu_memory_mb=300, cpu_cores=1)
    two_cpus = TaskInfo(id=2, tenant_id=1, gpu_memory_mb=300, cpu_cores=2)
    other_size = TaskInfo(id=3, tenant_id=1, gpu_memory_mb=100, cpu_cores=1)
    measured, growth = [], GapTable.growth

    def counting(self, table, rows, shard_mb):
        measured.append((shard_mb, rows.tolist()))
        return growth(self, table, rows, shard_mb)

    monkeypatch.setattr(GapTable, "growth", counting)
    plugin.growth(table, one_cpu, np.arange(3))
    plugin.growth(table, two_cpus, np.arange(3))
    apply_bind(snapshot, one_cpu, nodes[1], [0])
    after_bind = [plugin.growth(table, task, np.arange(3)).tolist() for task in (two_cpus, one_cpu, other_size)]

    assert measured == [(300, [0, 1, 2]), (300, [1]), (100, [0, 1, 2])]
    monkeypatch.undo()
    afresh = [Fgd(lambda: WORKLOAD, gap_weight=3.0).growth(NodeTable(nodes, CONFIG), task, np.arange(3)).tolist()
              for task in (two_cpus, one_cpu, other_size)]
    assert after_bind == afresh


def test_without_a_target_workload_every_node_scores_alike():
    plugin = Fgd(lambda: TargetWorkload((), ()))
    table = NodeTable([node(1, [600, 0]), node(2, [0, 0])], CONFIG)
    task = TaskInfo(id=1, tenant_id=1, gpu_memory_mb=300)
    assert plugin.score_rows(None, task, table, np.arange(2)).tolist() == [50.0, 50.0]
    assert plugin.reserve(CycleState(CONFIG), task, table.nodes[0]) is None


def test_popularity_keeps_the_most_popular_shapes_covering_the_coverage():
    shapes = [WHOLE] * 6 + [SHARD] * 3 + [Shape(cpu=4)]
    workload = TargetWorkload.from_shapes(shapes, coverage=0.9)
    assert workload.shapes == (WHOLE, SHARD)
    assert workload.popularity == pytest.approx((6 / 9, 3 / 9))
    assert workload.counted == 10


def test_cpu_weight_counts_the_idle_cards_the_free_cpu_cannot_feed():
    # One shape: 1 card with 12 CPU, so 12 CPU per card. 8 idle cards with 72 free CPU feed only 6 of them:
    # with cpu_weight 1, F = 0 (the shape fits and can use every card) + 1 · (8 − 72 / 12) = 2.
    # With 96 CPU the node feeds all 8: F = 0; the paper's F (cpu_weight 0) is 0 for both.
    workload = TargetWorkload((Shape(cards=1, cpu=12),), (1.0,))
    starved, fed = node(1, [0] * 8, cpu=72), node(2, [0] * 8, cpu=96)
    table = NodeTable([starved, fed], CONFIG)
    rows = np.arange(2)
    state = frag.table_state(table, rows, np.array([72.0, 96.0]))
    assert frag.fragmentation(state, rows, frag.ShapeArrays(workload, table, cpu_weight=1.0)).tolist() \
        == pytest.approx([2.0, 0.0])
    assert frag.fragmentation(state, rows, frag.ShapeArrays(workload, table)).tolist() == pytest.approx([0.0, 0.0])


def test_an_admin_enabling_fgd_gets_the_measured_best_settings():
    # design §15.9: the stored row's settings and the ones left out both come from DEFAULTS.
    from scheduling.framework.registry import PluginSetting
    from scheduling.plugins.fgd import SPEC, factory

    assert dict(SPEC.default.extra) == {"tie_break": "best-fit", "cpu_weight": 1, "gap_weight": 3, "gap_horizon": 50}
    plugin = factory(PluginSetting("fgd", True, 1, {}))
    assert (plugin.tie_break, plugin.cpu_weight, plugin.gap_weight, plugin.gap_horizon) == ("best-fit", 1.0, 3.0, 50.0)


def test_best_fit_breaks_ties_of_the_totals_at_postscore_towards_the_fuller_node():
    # Both nodes see growth 0 for a whole card (every shape still fits after it); the node already holding a card
    # keeps less idle capacity afterwards, so best fit prefers it. fgd scores both alike, in whole points; its
    # PostScore adds the fit to the totals, under a point.
    workload = TargetWorkload((Shape(cards=1),), (1.0,))
    table = NodeTable([node(1, [0, 0, 0, 0], whole=(0,)), node(2, [0, 0, 0, 0])], CONFIG)
    task = TaskInfo(id=1, tenant_id=1, gpu_required=1)
    plain = Fgd(lambda: workload).score_rows(None, task, table, np.arange(2))
    plugin, state = Fgd(lambda: workload, tie_break="best-fit"), CycleState(CONFIG)
    fitted = plugin.score_rows(state, task, table, np.arange(2))
    assert plain[0] == plain[1] and fitted.tolist() == np.floor(plain).tolist()
    totals = plugin.post_score_rows(state, task, table, np.arange(2), np.array([150.0, 150.0]))
    assert 150 < totals[1] < totals[0] < 151
    # Without its whole-point scoring of these rows (the paper's setting), the totals are left as they are.
    paper = Fgd(lambda: workload)
    paper_state = CycleState(CONFIG)
    paper.score_rows(paper_state, task, table, np.arange(2))
    assert paper.post_score_rows(paper_state, task, table, np.arange(2), np.array([150.0, 150.0])).tolist() == [
        150.0, 150.0]


def test_best_fit_is_the_mean_share_of_gpu_and_cpu_a_node_keeps_after_the_task_taken_from_one():
    """fit = 1 − (GPU left + CPU left) / 2, each in [0, 1]: idle cards less the task's (a shard: its memory over the
    node's largest card) over the node's cards, free cores less the task's over its cores (at least 1 of each)."""
    from scheduling.plugins.fgd import FIT_SHARE

    loaded = node(1, [600, 0, 0])
    loaded.cpu_percent = 50.0
    nodes = [loaded, node(2, [0, 0], cpu=0), NodeInfo(id=3, name="n3", cpu_cores=4, cards=[])]
    table = NodeTable(nodes, CONFIG)
    rows = np.arange(3)
    idle, cards, free_cores = [2.4, 2.0, 0.0], [3, 2, 0], [4.0, 0.0, 4.0]
    for task in (TaskInfo(id=1, tenant_id=1, gpu_required=1, cpu_cores=2),
                 TaskInfo(id=2, tenant_id=1, gpu_memory_mb=300, cpu_cores=1), TaskInfo(id=3, tenant_id=1, cpu_cores=3)):
        plugin, state = Fgd(lambda: WORKLOAD, tie_break="best-fit"), CycleState(CONFIG)
        plugin.score_rows(state, task, table, rows)
        fits = plugin.post_score_rows(state, task, table, rows, np.zeros(3)) / FIT_SHARE
        expected = []
        for row, each in enumerate(nodes):
            largest = max((card.memory_total_mb for card in each.cards), default=1)
            share = task.gpu_required or (task.gpu_memory_mb / largest if task.is_fractional else 0.0)
            gpu_left = min(max((idle[row] - share) / max(cards[row], 1), 0.0), 1.0)
            cpu_left = min(max((free_cores[row] - task.cpu_cores) / max(each.cpu_cores, 1), 0.0), 1.0)
            expected.append(1 - (gpu_left + cpu_left) / 2)
        assert fits.tolist() == pytest.approx(expected, rel=1e-12)


def test_best_fit_reads_the_idle_cards_of_the_rows_a_bind_changed_from_the_scoring_that_measured_them(monkeypatch):
    """After a bind, scoring a task measures the changed row's cards once: PostScore's best fit finds their idle
    cards kept, and its totals are those of a fresh plugin."""
    from scheduling.framework.occupancy import apply_bind
    from scheduling.framework.table import table_for

    workload = TargetWorkload((Shape(cards=1, cpu=1), SHARD), (0.5, 0.5))
    nodes = [node(1, [600, 0, 0, 0]), node(2, [0, 0, 0, 0], whole=(0,))]
    snapshot = ClusterSnapshot(nodes=nodes)
    table = table_for(snapshot, CONFIG)
    rows = np.arange(2)
    task = TaskInfo(id=1, tenant_id=1, gpu_required=1, cpu_cores=1)
    plugin, state = Fgd(lambda: workload, tie_break="best-fit"), CycleState(CONFIG)
    plugin.score_rows(state, task, table, rows)
    plugin.post_score_rows(state, task, table, rows, np.zeros(2))
    apply_bind(snapshot, task, nodes[0], [1])
    measured = _rows_given(monkeypatch, "table_state")
    state = CycleState(CONFIG)
    plugin.score_rows(state, task, table, rows)
    totals = plugin.post_score_rows(state, task, table, rows, np.zeros(2))
    assert measured == [[0]]
    monkeypatch.undo()
    afresh, fresh_state, fresh_table = Fgd(lambda: workload, tie_break="best-fit"), CycleState(CONFIG), NodeTable(
        nodes, CONFIG)
    afresh.score_rows(fresh_state, task, fresh_table, rows)
    assert totals.tolist() == afresh.post_score_rows(fresh_state, task, fresh_table, rows, np.zeros(2)).tolist()


def test_the_framework_runs_fgds_postscore_so_best_fit_decides_every_time():
    """The seed's PostScore stage: skipped, the two nodes would tie and the draw pick either."""
    from scheduling.framework.framework import Framework
    from scheduling.framework.registry import PluginSetting, build_plugin_set
    from scheduling.plugins import default_registry
    from scheduling.plugins.fgd import DEFAULTS

    workload = TargetWorkload((Shape(cards=1),), (1.0,))
    plugin_set = build_plugin_set([PluginSetting("spread", False, 0), PluginSetting("fgd", True, 1, DEFAULTS)],
                                  default_registry(extra_plugins=()))
    [fgd] = plugin_set.post_scorers
    fgd.use_workload(workload)
    fuller, empty = node(1, [0, 0, 0, 0], whole=(0,)), node(2, [0, 0, 0, 0])
    snapshot = ClusterSnapshot(nodes=[fuller, empty])
    framework = Framework(plugin_set, CONFIG)
    for seed in range(8):
        result = framework.schedule(TaskInfo(id=1, tenant_id=1, gpu_required=1), snapshot, random.Random(seed))
        assert result.node is fuller and result.totals[fuller.id] > result.totals[empty.id]


@pytest.mark.parametrize("extra, message", [
    ({"tie_break": "worst-fit"}, "tie_break must be one of none|best-fit"),
    ({"cpu_weight": -1}, "cpu_weight must be a number from 0 to 10"),
    ({"cpu_weight": "1"}, "cpu_weight must be a number from 0 to 10"),
    ({"lookahead": 2}, "unknown fgd setting(s): lookahead"),
    ({"gap_weight": 11}, "gap_weight must be a number from 0 to 10"),
    ({"gap_horizon": 0}, "gap_horizon must be a number from 1 to 100000"),
    ({"gap_horizon": True}, "gap_horizon must be a number from 1 to 100000"),
])
def test_bad_settings_are_refused_with_their_reason(extra, message):
    from scheduling.framework.registry import validate_extra
    from scheduling.plugins import default_registry

    with pytest.raises(ValueError, match=message.replace("|", r"\|").replace("(", r"\(").replace(")", r"\)")):
        validate_extra("fgd", extra, default_registry(extra_plugins=()))


def test_the_setting_reaches_the_plugin():
    from scheduling.framework.registry import PluginSetting
    from scheduling.plugins.fgd import PAPER, factory

    plugin = factory(PluginSetting("fgd", True, 1, {"cpu_weight": 2.5}))
    assert (plugin.tie_break, plugin.cpu_weight) == ("best-fit", 2.5)
    plugin = factory(PluginSetting("fgd", True, 1, PAPER))
    assert (plugin.tie_break, plugin.cpu_weight, plugin.gap_weight) == ("none", 0.0, 0.0)
