"""The equivalence cache (`scheduling.framework.equivalence`) changes no decision: placements, cards and diagnostics
are those of the framework evaluating every filter and scorer afresh for each task, and a placement (or any row
refresh) is seen by the next task of the same class."""

import copy
import random
from dataclasses import replace

import numpy as np
import pytest

from nodes.agent.topology import TOPOLOGY_LABEL
from nodes.demo_cluster import DEMO_FLEET, topology_label
from scheduling.framework import reasons
from scheduling.framework.equivalence import EquivalenceCache
from scheduling.framework.framework import Framework
from scheduling.framework.occupancy import apply_bind
from scheduling.framework.registry import PluginSetting
from scheduling.framework.snapshot import CardInfo, ClusterSnapshot, TenancyView
from scheduling.framework.table import table_for
from scheduling.plugins import build_plugin_set, fgd, resource_filter
from scheduling.plugins.availability import NODE_OFFLINE
from scheduling.plugins.fgd.workload import TargetWorkload
from scheduling.plugins.resource_prefilter import INSUFFICIENT_GPU
from scheduling.replay.simulate import POLICIES
from tests.scheduling.framework.builders import CONFIG, make_cards, make_node, make_snapshot, make_task, occupy

TYPES = ("nvidia", "ascend", "hygon")
MODELS = {"nvidia": ("A100", "H100"), "ascend": ("910B",), "hygon": ("K100",)}
NVLINK_MODEL = next(model for _, model in DEMO_FLEET if model.nvlink)


class UnsharedFramework(Framework):
    """The reference: every filter and scorer evaluated afresh for every task, over the rows still feasible."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._filter_keys = [None] * len(self._filter_keys)
        self._score_keys = [None] * len(self._score_keys)


def mixed_cluster(rng: random.Random, *, two_vendor_nodes: bool = True):
    nodes = []
    for serial in range(120):
        gpu_type = rng.choice(TYPES)
        count = rng.choice((1, 2, 4, 8))
        cards = make_cards(count, gpu_type=gpu_type, model=rng.choice(MODELS[gpu_type]),
                           memory_mb=rng.choice((32768, 81920)))
        if two_vendor_nodes and serial % 11 == 0:
            cards += [CardInfo(index=i, type="ascend", model="910B", memory_total_mb=65536) for i in range(2)]
        for card in cards:
            card.memory_used_mb = rng.randrange(0, card.memory_total_mb // 4)
            if rng.random() < 0.2:
                occupy(card, rng.randint(1, 4), shard_mb=rng.choice((0, 4096)))
        labels = {}
        if gpu_type == "nvidia" and count >= 2 and rng.random() < 0.5:
            labels[TOPOLOGY_LABEL] = topology_label(replace(NVLINK_MODEL, cards=count))
        if rng.random() < 0.3:
            labels.update({"rdma": "true", "rdma-speed": str(rng.choice((100, 400)))})
        elif rng.random() < 0.1:
            labels["rdma"] = "false"
        node = make_node(card_list=cards, gpu_type=gpu_type, zone=rng.choice(("z1", "z2", "")),
                         region="r1", rack=rng.choice(("k1", "k2")), labels=labels,
                         status="offline" if rng.random() < 0.05 else "online",
                         schedulable=rng.random() > 0.03, cpu_percent=rng.uniform(0, 80),
                         memory_used_mb=rng.randrange(0, 200_000),
                         dedicated_tenant_id=2 if rng.random() < 0.05 else None)
        node.gpu_used = sum(1 for card in cards if card.whole_card_tasks)
        node.inference_tasks = rng.choice((0, 0, 15, 16))
        nodes.append(node)
    return make_snapshot(*nodes, tenancy=TenancyView(groups_of={1: frozenset({7}), 3: frozenset({7})}))


def mixed_tasks(rng: random.Random, count: int):
    tasks = []
    for _ in range(count):
        shape = rng.choice((0, 1, 1, 1, 2, 4, 8, "shard", "shard"))
        labels = {}
        if rng.random() < 0.2:
            labels.update({"zone": rng.choice(("z1", "z2", "z9")), "topology": rng.choice(("required", ""))})
        if rng.random() < 0.2:
            labels["nvlink"] = "required"
        if rng.random() < 0.1:
            labels["rdma"] = "required"
        if rng.random() < 0.15:
            labels["gpu-model"] = rng.choice(("A100", "H100", "910B"))
        tasks.append(make_task(
            tenant_id=rng.randint(1, 4), type=rng.choice(("batch", "batch", "inference")),
            gpu_type=rng.choice(("", "", *TYPES)), labels=labels,
            gpu_required=0 if shape == "shard" else shape,
            gpu_memory_mb=rng.choice((4096, 16384, 40000)) if shape == "shard" else rng.choice((0, 0, 30000)),
        ))
    return tasks


def reread_a_node(snapshot, rng: random.Random) -> None:
    """A node re-read between two tasks (what the cycle does after a commit): it changed state, placement,
    type or load."""
    node = rng.choice(snapshot.nodes)
    change = rng.choice(("status", "dedicated", "zone", "model", "load"))
    if change == "status":
        node.status = "offline" if node.status == "online" else "online"
    elif change == "dedicated":
        node.dedicated_tenant_id = None if node.dedicated_tenant_id else rng.randint(1, 4)
    elif change == "zone":
        node.zone = rng.choice(("z1", "z2", "z3", ""))
    elif change == "model" and node.cards:
        node.cards[0].model = rng.choice(("A100", "H100", "910B"))
    else:
        node.cpu_percent = rng.uniform(0, 95)
        for card in node.cards:
            card.memory_used_mb = rng.randrange(0, card.memory_total_mb)
    node.cache.clear()
    table = snapshot.table
    table.refresh_row(table.row_of[node.id])


def decisions(framework: Framework, snapshot, tasks, seed: int) -> list[tuple]:
    """Each task's outcome, as the cycle places it: node, cards, code, summary and stored diagnostics; now and
    then a node is re-read meanwhile."""
    rng = random.Random(seed)
    changes = random.Random(seed + 1)
    made = []
    for position, task in enumerate(tasks):
        if position % 7 == 6:
            reread_a_node(snapshot, changes)
        result = framework.schedule(task, snapshot, rng)
        cards = []
        if result.node is not None:
            cards = framework.reserve(task, result.node, snapshot.tenancy)
            if cards or not (task.gpu_required or task.is_fractional):
                apply_bind(snapshot, task, result.node, cards)
        made.append((task.id, result.node.id if result.node else None, list(cards), result.code, result.message,
                     result.compact_diagnostics(filtered_limit=None), result.totals, result.filtered))
    return made


def policy(name: str, tasks):
    plugin_set = build_plugin_set(POLICIES[name])
    for plugin, _ in plugin_set.scorers:
        if isinstance(plugin, fgd.Fgd):
            plugin.use_workload(TargetWorkload.from_tasks(tasks))
    return plugin_set


@pytest.mark.parametrize("layout", ["spread", "binpack", "fgd"])
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("two_vendor_nodes", [True, False], ids=["two-vendor-nodes", "one-card-group-per-node"])
def test_a_mixed_cluster_gets_the_same_placements_with_and_without_sharing(layout, seed, two_vendor_nodes):
    """Without nodes of several card groups the usage rules share results across GPU types, until a node re-read
    gives one a second card model."""
    rng = random.Random(seed)
    snapshot = mixed_cluster(rng, two_vendor_nodes=two_vendor_nodes)
    tasks = mixed_tasks(rng, 300)
    plugin_set = policy(layout, tasks)

    shared = decisions(Framework(plugin_set, CONFIG), copy.deepcopy(snapshot), tasks, seed)
    unshared = decisions(UnsharedFramework(plugin_set, CONFIG), copy.deepcopy(snapshot), tasks, seed)

    assert shared == unshared
    assert sum(1 for decision in shared if decision[1] is not None) > 100   # the cluster filled up meanwhile
    assert {decision[3] for decision in shared} > {None}                    # and some tasks found no node


def test_the_second_task_of_a_class_does_not_see_the_cards_the_first_took():
    full = make_node(cards=4)
    small = make_node(cards=2)
    snapshot = make_snapshot(full, small)
    framework = Framework(build_plugin_set([]), CONFIG)
    first, second = make_task(gpu_required=4), make_task(gpu_required=4)

    placed = framework.schedule(first, snapshot, random.Random(0))
    assert placed.node is full
    apply_bind(snapshot, first, full, framework.reserve(first, full))
    again = framework.schedule(second, snapshot, random.Random(0))

    assert again.node is None
    assert again.code == reasons.INSUFFICIENT_RESOURCES
    assert again.filtered[full.id].reasons == (INSUFFICIENT_GPU,)


def test_the_second_shard_of_a_class_does_not_see_the_memory_the_first_took():
    node = make_node(cards=1, memory_mb=40960)
    snapshot = make_snapshot(node)
    framework = Framework(build_plugin_set([]), CONFIG)
    first, second = make_task(gpu_memory_mb=30000), make_task(gpu_memory_mb=30000)

    assert framework.schedule(first, snapshot, random.Random(0)).node is node
    apply_bind(snapshot, first, node, framework.reserve(first, node, snapshot.tenancy))
    again = framework.schedule(second, snapshot, random.Random(0))

    assert again.node is None
    assert again.filtered[node.id].plugin == resource_filter.NAME


def test_the_scores_of_a_class_follow_a_placement():
    left, right = make_node(cards=8), make_node(cards=8)
    snapshot = make_snapshot(left, right)
    framework = Framework(build_plugin_set([PluginSetting("spread", True, 1)]), CONFIG)
    tasks = [make_task(gpu_required=1) for _ in range(6)]

    for task in tasks:
        result = framework.schedule(task, snapshot, random.Random(0))
        apply_bind(snapshot, task, result.node, framework.reserve(task, result.node))

    assert (left.gpu_used, right.gpu_used) == (3, 3)   # spread alternates: each bind lowers that node's score


def test_a_row_refreshed_another_way_is_evaluated_again():
    """A node re-read between two tasks of one class (it went offline): the cache recomputes its row."""
    node, other = make_node(cards=8), make_node(cards=8, cpu_percent=50)
    snapshot = make_snapshot(node, other)
    framework = Framework(build_plugin_set([]), CONFIG)

    assert framework.schedule(make_task(gpu_required=1), snapshot, random.Random(0)).node is node
    node.status = "offline"
    snapshot.table.refresh_row(snapshot.table.row_of[node.id])
    again = framework.schedule(make_task(gpu_required=1), snapshot, random.Random(0))

    assert again.node is other
    assert again.filtered[node.id].reasons == (NODE_OFFLINE,)


def test_a_new_table_starts_a_new_cache():
    node = make_node(cards=2)
    snapshot = make_snapshot(node)
    framework = Framework(build_plugin_set([]), CONFIG)
    assert framework.schedule(make_task(gpu_required=2), snapshot, random.Random(0)).node is node

    node.gpu_used = 2
    for card in node.cards:
        occupy(card, 1)
    snapshot.table = None   # changed outside apply_bind: the table (and with it the cache) is rebuilt

    assert framework.schedule(make_task(gpu_required=2), snapshot, random.Random(0)).node is None


def test_each_entry_evaluates_the_rows_logged_since_it_last_looked():
    """Entries that last looked at different points of the change log each get their own rows, though the cache
    works out the rows logged since a point once for all the entries that ask."""
    snapshot = make_snapshot(*(make_node(cards=2) for _ in range(3)))
    table = table_for(snapshot, CONFIG)
    cache = EquivalenceCache(table)
    asked: dict[str, list[list[int]]] = {"early": [], "late": [], "same point": []}

    def compute(name):
        def rows(some):
            asked[name].append(some.tolist())
            return np.zeros(len(some), np.int32)
        return rows

    cache.rows("early", 1, compute("early"))
    table.refresh_row(2)
    cache.rows("late", 1, compute("late"))
    cache.rows("same point", 1, compute("same point"))
    table.refresh_row(0)
    table.refresh_row(0)
    for name in asked:
        cache.rows(name, 1, compute(name))

    assert asked == {"early": [[0, 1, 2], [0, 2]], "late": [[0, 1, 2], [0]], "same point": [[0, 1, 2], [0]]}


def next_cycle(snapshot, tenancy: TenancyView | None = None):
    """The scheduler cache's next cycle: a new snapshot over the same nodes and table, the table's changes counted
    afresh (`NodeTable.forget_changes`)."""
    snapshot.table.forget_changes()
    later = ClusterSnapshot(nodes=snapshot.nodes, tenancy=tenancy or snapshot.tenancy)
    later.table = snapshot.table
    return later


def cycle_by_cycle(framework_of, snapshot, tasks, seed: int, *, per_cycle: int = 40) -> list[tuple]:
    """`decisions`, a cycle at a time: each with a framework of its own (`framework_of()`, as each cycle builds
    one) over a new snapshot of the same table, a node re-read between two cycles."""
    made, changes = [], random.Random(seed + 2)
    for start in range(0, len(tasks), per_cycle):
        if start:
            reread_a_node(snapshot, changes)
            snapshot = next_cycle(snapshot)
        made += decisions(framework_of(), snapshot, tasks[start:start + per_cycle], seed + start)
    return made


@pytest.mark.parametrize("layout", ["spread", "fgd"])
@pytest.mark.parametrize("seed", [4, 5])
def test_later_cycles_get_the_same_placements_with_and_without_sharing(layout, seed):
    """Each cycle's new framework of the same settings takes up the results of the cycles before it."""
    rng = random.Random(seed)
    snapshot = mixed_cluster(rng)
    table_for(snapshot, CONFIG)
    tasks = mixed_tasks(rng, 240)

    shared = cycle_by_cycle(lambda: Framework(policy(layout, tasks), CONFIG), copy.deepcopy(snapshot), tasks, seed)
    unshared = cycle_by_cycle(lambda: UnsharedFramework(policy(layout, tasks), CONFIG), copy.deepcopy(snapshot), tasks,
                              seed)

    assert shared == unshared
    assert sum(1 for decision in shared if decision[1] is not None) > 100


@pytest.fixture
def rows_evaluated(monkeypatch) -> list[int]:
    """How many rows each call of resource-filter's rule evaluated."""
    counted: list[int] = []
    evaluate = resource_filter.ResourceFilter.filter_rows

    def counting(self, state, task, table, rows):
        counted.append(len(rows))
        return evaluate(self, state, task, table, rows)

    monkeypatch.setattr(resource_filter.ResourceFilter, "filter_rows", counting)
    return counted


def test_a_later_cycle_evaluates_only_the_rows_changed_since(rows_evaluated):
    nodes = [make_node(cards=4) for _ in range(6)]
    snapshot = make_snapshot(*nodes)
    first = Framework(build_plugin_set([]), CONFIG)
    placed = first.schedule(make_task(gpu_required=2), snapshot, random.Random(0)).node
    apply_bind(snapshot, make_task(gpu_required=2), placed, [0, 1])

    later = next_cycle(snapshot)
    nodes[5].status = "offline"
    later.table.refresh_row(5)
    rows_evaluated.clear()
    result = Framework(build_plugin_set([]), CONFIG).schedule(make_task(gpu_required=2), later, random.Random(0))

    assert rows_evaluated == [2]     # of 6: the node placed on and the node re-read
    assert result.filtered[nodes[5].id].reasons == (NODE_OFFLINE,)


def test_other_plugin_settings_do_not_take_up_the_results(rows_evaluated):
    snapshot = make_snapshot(*(make_node(cards=4) for _ in range(6)))
    Framework(build_plugin_set([]), CONFIG).schedule(make_task(gpu_required=2), snapshot, random.Random(0))

    rows_evaluated.clear()
    Framework(build_plugin_set([PluginSetting("spread", True, 2)]), CONFIG).schedule(
        make_task(gpu_required=2), next_cycle(snapshot), random.Random(0))

    assert rows_evaluated == [6]


def test_other_share_groups_do_not_take_up_the_results():
    """A shard may join a card another tenant occupies only while the two share a group (design §8): a cycle under
    other share groups judges the card afresh."""
    node = make_node(cards=1, memory_mb=81920)
    occupy(node.cards[0], 1, shard_mb=8192)
    sharing = TenancyView(groups_of={1: frozenset({7}), 3: frozenset({7})})
    snapshot = make_snapshot(node, tenancy=sharing)
    shard = make_task(tenant_id=3, gpu_memory_mb=8192)
    assert Framework(build_plugin_set([]), CONFIG).schedule(shard, snapshot, random.Random(0)).node is node

    later = Framework(build_plugin_set([]), CONFIG).schedule(make_task(tenant_id=3, gpu_memory_mb=8192),
                                                            next_cycle(snapshot, TenancyView()), random.Random(0))

    assert later.node is None
    assert later.code == reasons.NO_TENANT_ELIGIBLE_GPU


def test_an_entry_far_behind_the_log_is_evaluated_afresh():
    """An entry behind by more logged refreshes than the table has rows: every row at once, not the log's rows."""
    snapshot = make_snapshot(*(make_node(cards=2) for _ in range(3)))
    table = table_for(snapshot, CONFIG)
    cache = EquivalenceCache(table)
    asked: list[list[int]] = []

    def rows(some):
        asked.append(some.tolist())
        return np.zeros(len(some), np.int32)

    cache.rows("slot", 1, rows)
    for row in (0, 1, 0, 1):
        table.refresh_row(row)
    cache.rows("slot", 1, rows)

    assert asked == [[0, 1, 2], [0, 1, 2]]
