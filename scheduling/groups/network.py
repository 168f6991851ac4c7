"""Network domains of a group's nodes: labels first, else the subnet of the internal IP, never a guess.

Same domain for every member ⇒ internal master address and NCCL; otherwise public addresses and gloo.
"""

import ipaddress
from collections import Counter
from dataclasses import dataclass

NETWORK_ZONE_LABEL = "heteroflow.network_zone"
VPC_LABEL = "heteroflow.vpc_id"
NCCL = "nccl"
GLOO = "gloo"


@dataclass(frozen=True)
class NodeAddress:
    node_id: int
    labels: dict
    internal_ip: str
    public_ip: str | None


@dataclass(frozen=True)
class CommunicationPlan:
    master_addr: str
    backend: str
    same_domain: bool


def network_domain(node: NodeAddress, *, duplicated_ips: frozenset[str] = frozenset()) -> str | None:
    """A node's network domain key, or None when nothing trustworthy says which domain it is in."""
    labels = node.labels or {}
    if labels.get(NETWORK_ZONE_LABEL):
        return f"zone:{labels[NETWORK_ZONE_LABEL]}"
    if labels.get(VPC_LABEL):
        return f"vpc:{labels[VPC_LABEL]}"
    interface = _interface(node.internal_ip)
    if interface is None or interface.network.prefixlen == interface.max_prefixlen:
        return None
    if str(interface.ip) in duplicated_ips:
        # Two members reporting one private address can only be in different VPCs: give each its own domain.
        return f"isolated:{node.node_id}"
    return f"subnet:{interface.network}"


def communication_plan(members: list[NodeAddress]) -> CommunicationPlan:
    """Master address and backend for a group whose rank-0 member runs on `members[0]`."""
    counts = Counter(str(iface.ip) for node in members if (iface := _interface(node.internal_ip)) is not None)
    duplicated = frozenset(ip for ip, count in counts.items() if count > 1 and _distinct_nodes(members, ip) > 1)
    domains = {network_domain(node, duplicated_ips=duplicated) for node in members}
    master = members[0]
    master_interface = _interface(master.internal_ip)
    if None not in domains and len(domains) == 1 and master_interface is not None:
        return CommunicationPlan(master_addr=str(master_interface.ip), backend=NCCL, same_domain=True)
    fallback = master.public_ip or (str(master_interface.ip) if master_interface else "")
    return CommunicationPlan(master_addr=fallback, backend=GLOO, same_domain=False)


def _distinct_nodes(members: list[NodeAddress], ip: str) -> int:
    return len({node.node_id for node in members if (iface := _interface(node.internal_ip)) and str(iface.ip) == ip})


def _interface(text: str):
    if not text:
        return None
    try:
        return ipaddress.ip_interface(text.strip())
    except ValueError:
        return None
