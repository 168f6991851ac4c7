"""nvlink on the real `nvidia-smi topo -m` captures, through the agent's parser and label encoding."""

from dataclasses import replace

import pytest

from nodes.agent.topology import TOPOLOGY_LABEL, encode_label, parse_nvidia_smi_topo
from scheduling.framework.framework import Framework
from scheduling.framework.registry import PluginSetting
from scheduling.plugins import build_plugin_set, nvlink
from scheduling.plugins.nvlink import Nvlink, node_topology
from tests.scheduling.framework.builders import CONFIG, make_cards, make_node, make_state, make_task, occupy
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


def mixed_node(*, busy_nvidia: tuple[int, ...] = (), busy_ascend: tuple[int, ...] = ()):
    """4 NVLinked NVIDIA cards (the label, from nvidia-smi, speaks of them) beside 4 Ascend cards numbered 0–3 too;
    the node's type is Ascend, which detection finds first."""
    topology = parse_nvidia_smi_topo((CAPTURES / "4gpu-nv4-2numa-1nic.txt").read_text())
    nvidia_cards = make_cards(4)
    ascend_cards = make_cards(4, gpu_type="ascend", model="910B")
    for index in busy_nvidia:
        occupy(nvidia_cards[index], tenant_id=9)
    for index in busy_ascend:
        occupy(ascend_cards[index], tenant_id=9)
    return make_node(gpu_type="ascend", card_list=ascend_cards + nvidia_cards,
                     labels={TOPOLOGY_LABEL: encode_label(topology)})


def test_on_a_mixed_node_only_nvidia_cards_count_as_free_in_a_domain():
    nvidia_only = captured_node("4gpu-nv4-2numa-1nic.txt", busy=(0, 1))
    nvidia_task = make_task(gpu_required=2, gpu_type="nvidia")

    mixed_score = Nvlink().score(make_state(), nvidia_task, mixed_node(busy_nvidia=(0, 1)))

    assert mixed_score == Nvlink().score(make_state(), nvidia_task, nvidia_only)
    assert mixed_score != Nvlink().score(make_state(), nvidia_task, mixed_node())


def test_a_task_of_another_type_on_a_mixed_node_is_scored_as_without_topology_data():
    ascend_task = make_task(gpu_required=2, gpu_type="ascend")
    assert Nvlink().score(make_state(), ascend_task, mixed_node(busy_ascend=(0,))) == nvlink.NEUTRAL


def test_required_on_a_mixed_node_counts_the_free_nvidia_cards_of_the_domain():
    required = make_task(gpu_required=3, gpu_type="nvidia", labels={"nvlink": "required"})
    plugin, state = Nvlink(), make_state()

    assert not plugin.filter(state, required, mixed_node(busy_nvidia=(0, 1))).is_success
    assert plugin.filter(state, required, mixed_node(busy_ascend=(0, 1))).is_success
    ascend_required = make_task(gpu_required=3, gpu_type="ascend", labels={"nvlink": "required"})
    assert plugin.filter(state, ascend_required, mixed_node()).is_success


def test_card_choice_on_a_mixed_node_takes_nvlink_data_for_nvidia_cards_only():
    framework = Framework(build_plugin_set([PluginSetting("nvlink", True, 1)]), CONFIG)
    node = mixed_node(busy_nvidia=(0,))

    nvidia_cards = framework.reserve(make_task(gpu_required=2, gpu_type="nvidia"), node)
    ascend_group = replace(node, cards=[card for card in node.cards if card.type == "ascend"], cache={})

    assert (nvidia_cards.card_type, sorted(nvidia_cards)) == ("nvidia", [2, 3])
    assert Nvlink().reserve(make_state(), make_task(gpu_required=2, gpu_type="ascend"), ascend_group) is None
