import pytest

from scheduling.plugins import rdma
from scheduling.plugins.rdma import Rdma
from tests.scheduling.framework.builders import make_node, make_state, make_task


@pytest.mark.parametrize("labels, expected", [
    ({}, 50),
    ({"rdma": "true"}, 70),
    ({"rdma": "true", "rdma-speed": "200"}, 90),
    ({"rdma": "true", "rdma-speed": "400"}, 100),
    ({"rdma": "true", "rdma-speed": "not-a-number"}, 70),
    ({"rdma": "false"}, 40),
    ({"rdma": "false", "rdma-speed": "400"}, 40),
])
def test_score(labels, expected):
    assert Rdma().score(make_state(), make_task(), make_node(labels=labels)) == expected


def test_required_removes_only_nodes_labelled_false():
    task = make_task(labels={"rdma": "required"})
    plugin, state = Rdma(), make_state()
    assert plugin.filter(state, task, make_node(labels={"rdma": "true"})).is_success
    assert plugin.filter(state, task, make_node()).is_success
    status = plugin.filter(state, task, make_node(labels={"rdma": "false"}))
    assert not status.is_success and status.reasons == (rdma.RDMA_REQUIRED,)


def test_without_the_label_false_nodes_pass():
    assert Rdma().filter(make_state(), make_task(), make_node(labels={"rdma": "false"})).is_success
