"""design §16.3: taints, tolerations and node selectors (the node-pools plugin and `nodes.taints`)."""

import random

import pytest

from nodes.taints import tolerates
from scheduling.framework.framework import Framework
from scheduling.framework.registry import build_plugin_set
from scheduling.plugins import default_registry
from scheduling.plugins.node_pools import NODE_SELECTOR_MISMATCH, TAINT_NOT_TOLERATED, NodePools
from tests.scheduling.framework.builders import CONFIG, make_node, make_snapshot, make_state, make_task

BIG_POOL = {"key": "pool", "value": "big", "effect": "NoSchedule"}
SOFT = {"key": "pool", "value": "big", "effect": "PreferNoSchedule"}


def framework():
    return Framework(build_plugin_set([], default_registry(extra_plugins=[])), CONFIG)


@pytest.mark.parametrize("toleration, tolerated", [
    ({"key": "pool", "operator": "Equal", "value": "big", "effect": "NoSchedule"}, True),
    ({"key": "pool", "operator": "Equal", "value": "big"}, True),
    ({"key": "pool", "operator": "Equal", "value": "small"}, False),
    ({"key": "pool", "operator": "Exists"}, True),
    ({"key": "other", "operator": "Exists"}, False),
    ({"key": "", "operator": "Exists"}, True),
    ({"key": "pool", "operator": "Exists", "effect": "PreferNoSchedule"}, False),
])
def test_toleration_matching(toleration, tolerated):
    assert tolerates(toleration, BIG_POOL) is tolerated


def test_untolerated_no_schedule_taint_refuses_the_node():
    plugin, state, node = NodePools(), make_state(), make_node(taints=[BIG_POOL])
    status = plugin.filter(state, make_task(gpu_required=1), node)
    assert not status.is_success and status.reasons == (TAINT_NOT_TOLERATED,)
    tolerant = make_task(gpu_required=1, tolerations=[{"key": "pool", "operator": "Exists"}])
    assert plugin.filter(state, tolerant, node).is_success


def test_selector_keeps_only_nodes_with_every_label():
    plugin, state = NodePools(), make_state()
    task = make_task(node_selector={"pool": "big", "disk": "ssd"})
    assert plugin.filter(state, task, make_node(labels={"pool": "big", "disk": "ssd", "x": "y"})).is_success
    status = plugin.filter(state, task, make_node(labels={"pool": "big"}))
    assert not status.is_success and status.reasons == (NODE_SELECTOR_MISMATCH,)


def test_prefer_no_schedule_only_lowers_the_score():
    plugin, state = NodePools(), make_state()
    soft = make_node(taints=[SOFT])
    assert plugin.filter(state, make_task(), soft).is_success
    assert plugin.score(state, make_task(), soft) < plugin.score(state, make_task(), make_node())
    assert plugin.score(state, make_task(tolerations=[{"key": "pool", "operator": "Exists"}]), soft) == 100


def test_a_task_without_toleration_never_lands_on_a_tainted_node_and_the_summary_names_both_reasons():
    tainted = make_node(name="tainted", taints=[BIG_POOL], labels={"pool": "big"})
    other = make_node(name="other", labels={"pool": "small"})
    snapshot = make_snapshot(tainted, other)
    result = framework().schedule(make_task(gpu_required=8, node_selector={"pool": "big"}), snapshot,
                                  random.Random(0))
    assert result.node is None
    assert f"1 {TAINT_NOT_TOLERATED}" in result.message and f"1 {NODE_SELECTOR_MISMATCH}" in result.message
    placed = framework().schedule(make_task(gpu_required=8), snapshot, random.Random(0))
    assert placed.node.name == "other"
    tolerant = make_task(gpu_required=8, node_selector={"pool": "big"},
                         tolerations=[{"key": "pool", "operator": "Equal", "value": "big"}])
    assert framework().schedule(tolerant, snapshot, random.Random(0)).node.name == "tainted"


def test_the_shared_result_follows_a_node_tainted_after_it_was_computed():
    node = make_node(name="n")
    snapshot, fw = make_snapshot(node), framework()
    assert fw.schedule(make_task(gpu_required=1), snapshot, random.Random(0)).node is node
    node.taints = [BIG_POOL]
    snapshot.table.refresh_rows([0])
    assert fw.schedule(make_task(gpu_required=1), snapshot, random.Random(0)).node is None
