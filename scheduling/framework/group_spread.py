"""What the scheduler knows of the inference groups that spread their replicas (design §17.2): per group, how many
of its replicas each domain (a node, a rack, a zone) holds. The snapshot carries one per such group and `apply_bind`
counts each bind, so the next replica of the same cycle sees it."""

from dataclasses import dataclass, field

from scheduling.framework.snapshot import NodeInfo

SPREAD_ACROSS = ("node", "rack", "zone")


def domain_of(node: NodeInfo, across: str) -> str:
    """The node's value of the spread key; "" when it has none (such a node is in no domain)."""
    return node.name if across == "node" else getattr(node, across) or ""


@dataclass
class GroupSpread:
    across: str
    max_skew: int = 1
    hard: bool = False
    counts: dict[str, int] = field(default_factory=dict)

    def placed(self, node: NodeInfo) -> None:
        domain = domain_of(node, self.across)
        if domain:
            self.counts[domain] = self.counts.get(domain, 0) + 1
