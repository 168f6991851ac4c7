"""nvlink on the real `nvidia-smi topo -m` captures, through the agent's parser and label encoding."""


import pytest

from nodes.agent.topology import TOPOLOGY_LABEL, encode_label, parse_nvidia_smi_topo
from scheduling.plugins import nvlink
from scheduling.plugins.nvlink import Nvlink, node_topology
from tests.scheduling.framework.builders import make_node, make_state, make_task, occupy
from tests.shared_data import TOPOLOGY_CAPTURES

CAPTURES = TOPOLOGY_CAPTURES


def captured_node(capture: str, *, busy: tuple[int, ...] = ()):
    topology = parse_nvidia_smi_topo((CAPTURES / capture).read_text())
    node = make_node(cards=len(topology.cards), labels={TOPOLOGY_LABEL: encode_label(topology)})
    for index in busy:
        occupy(node.cards[index], tenant_id=9)
    return node


def score(node, gpus: int) -> float:
    return Nvlink().score(make_state(), make_task(gpu_required=gpus), node)


def test_domains_of_the_captures():
    assert node_topology(captured_node("dgx-a100-8gpu-nv12-10nic.txt")).domains == [list(range(8))]
    assert node_topology(captured_node("4gpu-nv4-2numa-1nic.txt")).domains == [[0, 1, 2, 3]]
    assert node_topology(captured_node("2gpu-nv4-gpu-numa-id.txt")).domains == [[0, 1]]
    assert node_topology(captured_node("8gpu-pcie-pix-phb-sys.txt")).domains == [[i] for i in range(8)]
    assert node_topology(captured_node("1gpu-6nic.txt")).domains == [[0]]


@pytest.mark.parametrize("capture, gpus, busy, expected", [
    # one domain, all free (+40), pairs share a NUMA node (+15): 50+50+40+15
    ("dgx-a100-8gpu-nv12-10nic.txt", 2, (), 155),
    # exact fill of an all-free domain (+30 +40), but 8 cards span NUMA nodes (−10)
    ("dgx-a100-8gpu-nv12-10nic.txt", 8, (), 160),
    # at most 2 cards per NUMA node on the DGX: 4 cards cross NUMA
    ("dgx-a100-8gpu-nv12-10nic.txt", 4, (), 130),
    ("4gpu-nv4-2numa-1nic.txt", 4, (), 160),
    ("4gpu-nv4-2numa-1nic.txt", 2, (), 155),
    # a busy card: the domain is no longer all free, cards 2 and 3 still share NUMA node 1
    ("4gpu-nv4-2numa-1nic.txt", 2, (0,), 115),
    ("4gpu-nv4-2numa-1nic.txt", 3, (0,), 90),
    # exact fill, same NUMA node: 50+50+30+40+15
    ("2gpu-nv4-gpu-numa-id.txt", 2, (), 185),
    # PCIe only: the group must span domains (−20); NUMA unknown adds nothing
    ("8gpu-pcie-pix-phb-sys.txt", 2, (), 30),
    # too few free cards for any group: neutral (resource-filter removes the node anyway)
    ("2gpu-nv4-gpu-numa-id.txt", 2, (1,), 50),
])
def test_group_scores(capture, gpus, busy, expected):
    assert score(captured_node(capture, busy=busy), gpus) == expected


def test_one_card_task_and_missing_data_score_50():
    assert score(captured_node("dgx-a100-8gpu-nv12-10nic.txt"), 1) == 50
    assert score(make_node(), 4) == 50
    assert score(make_node(labels={TOPOLOGY_LABEL: "garbage"}), 4) == 50


def test_required_removes_nodes_without_a_large_enough_free_domain():
    plugin, state = Nvlink(), make_state()
    task = make_task(gpu_required=2, labels={"nvlink": "required"})
    assert plugin.filter(state, task, captured_node("dgx-a100-8gpu-nv12-10nic.txt")).is_success
    status = plugin.filter(state, task, captured_node("8gpu-pcie-pix-phb-sys.txt"))
    assert status.reasons == (nvlink.NVLINK_REQUIRED,)
    busy_pair = captured_node("2gpu-nv4-gpu-numa-id.txt", busy=(0,))
    assert not plugin.filter(state, task, busy_pair).is_success


def test_required_passes_without_data_or_for_one_card():
    plugin, state = Nvlink(), make_state()
    assert plugin.filter(state, make_task(gpu_required=4, labels={"nvlink": "required"}), make_node()).is_success
    one_card = make_task(gpu_required=1, labels={"nvlink": "required"})
    assert plugin.filter(state, one_card, captured_node("8gpu-pcie-pix-phb-sys.txt")).is_success
