import pytest

from nodes.agent.topology import (
    TOPOLOGY_LABEL, GpuTopology, decode_label, encode_label, nvlink_domains, parse_nvidia_smi_topo,
)

from .conftest import SHARED_TOPOLOGY_FIXTURES

# What tests/fixtures/README.md says each capture must parse to: (domains, NUMA node per card).
EXPECTED = {
    "dgx-a100-8gpu-nv12-10nic.txt": ([[0, 1, 2, 3, 4, 5, 6, 7]], [3, 3, 1, 1, 7, 7, 5, 5]),
    "4gpu-nv4-2numa-1nic.txt": ([[0, 1, 2, 3]], [0, 0, 1, 1]),
    "2gpu-nv4-gpu-numa-id.txt": ([[0, 1]], [0, 0]),
    "1gpu-6nic.txt": ([[0]], [0]),
    "8gpu-pcie-pix-phb-sys.txt": ([[card] for card in range(8)], [None] * 8),
}


def test_every_topology_capture_is_covered():
    assert SHARED_TOPOLOGY_FIXTURES.is_dir(), f"topology captures missing at {SHARED_TOPOLOGY_FIXTURES}"
    assert {path.name for path in SHARED_TOPOLOGY_FIXTURES.iterdir()} - {"README.md"} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_topology_fixture_parses_to_documented_domains_and_numa(name):
    topology = parse_nvidia_smi_topo((SHARED_TOPOLOGY_FIXTURES / name).read_text())
    domains, numa = EXPECTED[name]
    assert nvlink_domains(topology) == domains
    assert [topology.numa[card] for card in topology.cards] == numa


def test_nic_rows_and_columns_are_not_cards():
    topology = parse_nvidia_smi_topo((SHARED_TOPOLOGY_FIXTURES / "dgx-a100-8gpu-nv12-10nic.txt").read_text())
    assert topology.cards == tuple(range(8))
    assert len(topology.links) == 28


def test_whitespace_aligned_copy_with_ansi_header_and_soc_legend():
    # Older drivers print SOC, copies pasted from a terminal lose their tabs, TTYs get an underlined header.
    text = (
        "\x1b[4m        GPU0    GPU1    GPU2    CPU Affinity    NUMA Affinity\x1b[0m\n"
        "GPU0     X      NV2     SOC     0-11            0\n"
        "GPU1    NV2      X      SOC     0-11            0\n"
        "GPU2    SOC     SOC      X      12-23           N/A\n"
        "\nLegend:\n\n  X   = Self\n  SOC  = Connection traversing PCIe as well as the SMP link between CPU sockets\n"
    )
    topology = parse_nvidia_smi_topo(text)
    assert nvlink_domains(topology) == [[0, 1], [2]]
    assert topology.numa == {0: 0, 1: 0, 2: None}


def test_text_without_gpu_matrix_is_rejected():
    with pytest.raises(ValueError):
        parse_nvidia_smi_topo("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_label_round_trip(name):
    topology = parse_nvidia_smi_topo((SHARED_TOPOLOGY_FIXTURES / name).read_text())
    label = encode_label(topology)
    assert decode_label(label) == topology
    assert " " not in label and "\t" not in label


def test_label_format():
    topology = GpuTopology(links=frozenset({(0, 2), (0, 1)}), numa={0: 0, 1: 0, 2: 1}, cards=(0, 1, 2, 3))
    assert TOPOLOGY_LABEL == "heteroflow.io/gpu-topology"
    assert encode_label(topology) == "nv=0-1,0-2;numa=0:0,1:0,2:1,3:-"
    assert nvlink_domains(topology) == [[0, 1, 2], [3]]


def test_pcie_only_label_decodes_to_single_card_domains():
    assert nvlink_domains(decode_label("nv=;numa=0:-,1:-,2:-")) == [[0], [1], [2]]


@pytest.mark.parametrize("text", [
    None, "", "garbage", "nv=0-1", "numa=0:0", "nv;numa=0:0", "nv=;numa=", "nv=0-1;numa=0:0",
    "nv=1-0;numa=0:0,1:0", "nv=0-0;numa=0:0", "nv=0-1,0-1;numa=0:0,1:0", "nv=;numa=0:0,0:1",
    "nv=;numa=0:x", "nv=;numa=0:0;extra=1", "nv=a-b;numa=0:0", "nv=;numa=0:0,", "nv=0-1;numa=0:0,1:0 ",
])
def test_malformed_labels_decode_to_none(text):
    assert decode_label(text) is None


def test_topology_is_hashable_and_validated():
    topology = GpuTopology(links=frozenset({(0, 1)}), numa={0: None}, cards=(0, 1))
    assert hash(topology) == hash(GpuTopology(links=frozenset({(0, 1)}), numa={}, cards=(0, 1)))
    with pytest.raises(ValueError):
        GpuTopology(links=frozenset({(1, 0)}), numa={}, cards=(0, 1))
