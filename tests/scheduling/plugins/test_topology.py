import pytest

from scheduling.plugins.topology import Topology
from tests.scheduling.framework.builders import make_node, make_state, make_task

NODE = {"region": "eu", "zone": "eu-1", "rack": "r7"}


@pytest.mark.parametrize("labels, expected", [
    ({"region": "eu", "zone": "eu-1", "rack": "r7"}, 80),
    ({"region": "eu", "zone": "eu-1"}, 70),
    ({"region": "eu"}, 55),
    ({}, 50),
    ({"zone": "eu-1"}, 65),
    ({"rack": "r7"}, 60),
    ({"region": "us", "zone": "us-1", "rack": "r1"}, 50),
])
def test_score_adds_each_matching_field(labels, expected):
    assert Topology().score(make_state(), make_task(labels=labels), make_node(**NODE)) == expected


def test_empty_node_field_adds_nothing():
    task = make_task(labels={"region": "eu", "zone": "eu-1", "rack": "r7"})
    assert Topology().score(make_state(), task, make_node(region="eu")) == 55
