"""The demo cluster of `manage.py seed_demo`: ten GPU architectures with realistic cards and layouts."""

from dataclasses import dataclass

from nodes.agent.topology import TOPOLOGY_LABEL, GpuTopology, encode_label


@dataclass(frozen=True)
class NodeModel:
    gpu_type: str
    model: str
    cards: int
    memory_mb: int
    cpu_cores: int
    memory_gb: int
    # "nvswitch": every card linked to every other; "pairs": NVLink bridges between (0,1), (2,3)…; None: PCIe only.
    nvlink: str | None = None
    numa_nodes: int = 2
    rdma_gbps: int | None = None


# (count, model): about forty nodes covering all ten architectures.
DEMO_FLEET: list[tuple[int, NodeModel]] = [
    (5, NodeModel("nvidia", "A100-SXM4-80GB", 8, 81920, 128, 1024, nvlink="nvswitch", rdma_gbps=200)),
    (3, NodeModel("nvidia", "H100-SXM5-80GB", 8, 81920, 192, 2048, nvlink="nvswitch", rdma_gbps=400)),
    (3, NodeModel("nvidia", "Tesla V100-SXM2-32GB", 8, 32768, 96, 768, nvlink="pairs")),
    (3, NodeModel("nvidia", "Tesla T4", 4, 15360, 48, 256, numa_nodes=1)),
    (2, NodeModel("nvidia", "NVIDIA A10", 1, 23028, 32, 128, numa_nodes=1)),
    (4, NodeModel("ascend", "Ascend 910B", 8, 65536, 192, 1536, numa_nodes=4, rdma_gbps=200)),
    (2, NodeModel("ascend", "Ascend 310P", 4, 24576, 64, 256, numa_nodes=1)),
    (3, NodeModel("musa", "MTT S4000", 8, 49152, 96, 1024)),
    (3, NodeModel("hygon", "DCU K100", 8, 65536, 128, 1024, numa_nodes=4)),
    (3, NodeModel("metax", "MXC500", 8, 65536, 128, 1024)),
    (2, NodeModel("enflame", "S60", 8, 49152, 96, 768)),
    (2, NodeModel("iluvatar", "BI-V150", 8, 32768, 96, 768)),
    (2, NodeModel("biren", "BR104", 8, 32768, 96, 768)),
    (2, NodeModel("cambricon", "MLU370-X8", 8, 49152, 96, 768)),
    (2, NodeModel("kunlun", "P800", 8, 98304, 128, 1024)),
]

REGIONS = [("cn-north", ["cn-north-a", "cn-north-b"]), ("cn-east", ["cn-east-a"])]
RACKS_PER_ZONE = 3


def card_numa(node_model: NodeModel, index: int) -> int:
    per_node = max(node_model.cards // node_model.numa_nodes, 1)
    return min(index // per_node, node_model.numa_nodes - 1)


def topology_label(node_model: NodeModel) -> str | None:
    if node_model.nvlink is None:
        return None
    cards = tuple(range(node_model.cards))
    if node_model.nvlink == "nvswitch":
        links = frozenset((a, b) for a in cards for b in cards if a < b)
    else:
        links = frozenset((a, a + 1) for a in cards[::2] if a + 1 in cards)
    numa = {card: card_numa(node_model, card) for card in cards}
    return encode_label(GpuTopology(links=links, numa=numa, cards=cards))


def demo_nodes() -> list[dict]:
    """Every demo node's fields, cards and labels, deterministic so that seeding twice changes nothing."""
    placements = [
        (region, zone, f"{zone}-r{rack}") for region, zones in REGIONS for zone in zones
        for rack in range(1, RACKS_PER_ZONE + 1)
    ]
    nodes = []
    serial = 0
    for count, node_model in DEMO_FLEET:
        for ordinal in range(1, count + 1):
            region, zone, rack = placements[serial % len(placements)]
            labels = {}
            label = topology_label(node_model)
            if label:
                labels[TOPOLOGY_LABEL] = label
            if node_model.rdma_gbps:
                labels.update({"rdma": "true", "rdma-speed": str(node_model.rdma_gbps)})
            subnet = 3 + serial // 16
            nodes.append(
                {
                    "name": f"{node_model.gpu_type}-{node_model.model.split()[-1].lower()}-{ordinal:02d}",
                    "node_model": node_model,
                    "region": region,
                    "zone": zone,
                    "rack": rack,
                    "labels": labels,
                    "internal_ip": f"10.0.{subnet}.{10 + serial % 16}/24",
                    "public_ip": f"203.0.113.{10 + serial}",
                }
            )
            serial += 1
    return nodes
