import random

import pytest

from scheduling.framework.framework import Framework
from scheduling.framework.registry import PluginSetting, build_plugin_set
from scheduling.plugins import default_registry
from scheduling.plugins.topology import Topology
from tests.scheduling.framework.builders import CONFIG, make_node, make_snapshot, make_state, make_task

NODE = {"region": "eu", "zone": "eu-1", "rack": "r7"}


def scored(task, node) -> float:
    """Topology's score of `node` for `task`, PreScore first as the framework runs them."""
    plugin, state = Topology(), make_state()
    assert plugin.pre_score(state, task, make_snapshot(node)).is_success
    return plugin.score(state, task, node)


@pytest.mark.parametrize("labels, expected", [
    ({"region": "eu", "zone": "eu-1", "rack": "r7"}, 80),
    ({"region": "eu", "zone": "eu-1"}, 70),
    ({"region": "eu"}, 55),
    ({}, 50),
    ({"zone": "eu-1"}, 65),
    ({"rack": "r7"}, 60),
    ({"region": "us", "zone": "us-1", "rack": "r1"}, 50),
    ({"zone": " eu-1 "}, 65),
])
def test_score_adds_each_matching_field(labels, expected):
    assert scored(make_task(labels=labels), make_node(**NODE)) == expected


def test_empty_node_field_adds_nothing():
    task = make_task(labels={"region": "eu", "zone": "eu-1", "rack": "r7"})
    assert scored(task, make_node(region="eu")) == 55


def test_prescore_prepares_what_the_task_asks_for_and_score_reads_only_that():
    """The seed's PreScore stage, as the framework runs it: a score without its preparation has nothing to read."""
    plugin, state, task, node = Topology(), make_state(), make_task(labels={"zone": "eu-1"}), make_node(**NODE)
    with pytest.raises(KeyError):
        plugin.score(state, task, node)
    plugin.pre_score(state, task, make_snapshot(node))
    assert state["topology"] == {"region": "", "zone": "eu-1", "rack": ""}
    assert plugin.score(state, task, node) == 65


def test_the_framework_runs_prescore_before_the_scores_it_shares():
    """The task that asks for the node's zone gets it, its topology score 65; the tasks after it in the same
    snapshot share each other's scores (the equivalence cache) only when they ask for the same place."""
    plugin_set = build_plugin_set([PluginSetting("spread", False, 0)], default_registry(extra_plugins=()))
    assert [plugin.name for plugin in plugin_set.pre_scorers] == ["topology"]
    framework = Framework(plugin_set, CONFIG)
    near, far = make_node(name="near", zone="eu-1"), make_node(name="far", zone="us-1")
    snapshot = make_snapshot(near, far)
    for zone, chosen in (("eu-1", near), ("us-1", far), ("eu-1", near)):
        result = framework.schedule(make_task(gpu_required=1, labels={"zone": zone}), snapshot, random.Random(0))
        assert result.node is chosen and result.scores[chosen.id]["topology"] == 65
