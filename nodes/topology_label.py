"""GPU interconnect topology and its node-label encoding.

This module is the single definition of the ``heteroflow.io/gpu-topology`` node label. The node agent writes it
from ``nvidia-smi topo -m`` (``nodes.agent.topology``); the scheduler's nvlink plugin reads it back. It is pure
(standard library only, no Django) so that both sides can import it.

Label grammar
-------------
::

    label  = "nv=" [pair *("," pair)] ";numa=" card *("," card)
    pair   = index "-" index          ; an NVLink between two cards, lower index first
    card   = index ":" (node / "-")   ; the card's NUMA node, "-" when unknown
    index  = 1*DIGIT
    node   = 1*DIGIT

Examples::

    nv=0-1,0-2,1-2;numa=0:0,1:0,2:1,3:-     cards 0-2 share an NVLink domain, card 3 stands alone
    nv=;numa=0:-,1:-                        PCIe only: one single-card domain per card

Every card appears in the ``numa`` list even when it has no link, so a PCIe-only node still decodes to one
single-card NVLink domain per card. Pairs and cards are written sorted, so equal topologies give equal labels.
The text uses only ASCII digits and ``=;:,-``: no whitespace, nothing that needs quoting in JSON or a URL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TOPOLOGY_LABEL = "heteroflow.io/gpu-topology"
# The label is written from `nvidia-smi topo -m`: on a node with cards of several vendors it describes the NVIDIA
# cards only (each vendor numbers its cards from 0, so its indexes are the NVIDIA cards' indexes).
LABELLED_CARD_TYPE = "nvidia"

_PAIR = re.compile(r"(\d+)-(\d+)")
_CARD = re.compile(r"(\d+):(\d+|-)")


@dataclass(frozen=True)
class GpuTopology:
    """NVLink pairs and per-card NUMA nodes of one node's cards.

    ``links`` holds ``(a, b)`` with ``a < b``; ``cards`` is sorted; ``numa`` maps a card to its NUMA node, a card
    missing from it (or mapped to ``None``) has an unknown NUMA node.
    """

    links: frozenset[tuple[int, int]]
    numa: dict[int, int | None] = field(hash=False)
    cards: tuple[int, ...]

    def __post_init__(self) -> None:
        if list(self.cards) != sorted(set(self.cards)):
            raise ValueError(f"cards must be sorted and unique: {self.cards}")
        known = set(self.cards)
        for a, b in self.links:
            if not a < b or a not in known or b not in known:
                raise ValueError(f"link {a}-{b} must join two known cards, lower index first")
        if not set(self.numa) <= known:
            raise ValueError(f"NUMA nodes given for unknown cards: {sorted(set(self.numa) - known)}")


def encode_label(topology: GpuTopology) -> str:
    """Return the label text for ``topology`` (see the module docstring for the grammar)."""
    pairs = ",".join(f"{a}-{b}" for a, b in sorted(topology.links))
    cards = ",".join(f"{card}:{_numa_text(topology.numa.get(card))}" for card in topology.cards)
    return f"nv={pairs};numa={cards}"


def decode_label(text: str | None) -> GpuTopology | None:
    """Parse a label written by :func:`encode_label`; ``None`` for empty or malformed text, never raises."""
    if not text:
        return None
    parts = text.split(";")
    if len(parts) != 2 or not all("=" in part for part in parts):
        return None
    sections = dict(part.split("=", 1) for part in parts)
    if set(sections) != {"nv", "numa"}:
        return None
    pair_items = sections["nv"].split(",") if sections["nv"] else []
    card_items = sections["numa"].split(",") if sections["numa"] else []
    pair_matches = [_PAIR.fullmatch(item) for item in pair_items]
    card_matches = [_CARD.fullmatch(item) for item in card_items]
    if not card_matches or not all(pair_matches) or not all(card_matches):
        return None
    numa = {int(m[1]): None if m[2] == "-" else int(m[2]) for m in card_matches}
    links = frozenset((int(m[1]), int(m[2])) for m in pair_matches)
    if len(numa) != len(card_matches) or len(links) != len(pair_matches):
        return None
    try:
        return GpuTopology(links=links, numa=numa, cards=tuple(sorted(numa)))
    except ValueError:
        return None


def nvlink_domains(topology: GpuTopology) -> list[list[int]]:
    """Group cards into NVLink domains (connected components of the link graph) with union-find.

    Cards without links form single-card domains. Members are sorted, domains are sorted by their members.
    """
    parent = {card: card for card in topology.cards}

    def root(card: int) -> int:
        while parent[card] != card:
            parent[card] = parent[parent[card]]  # path halving keeps the trees flat
            card = parent[card]
        return card

    for a, b in topology.links:
        root_a, root_b = root(a), root(b)
        if root_a != root_b:
            parent[max(root_a, root_b)] = min(root_a, root_b)
    domains: dict[int, list[int]] = {}
    for card in topology.cards:
        domains.setdefault(root(card), []).append(card)
    return sorted(domains.values())


def _numa_text(node: int | None) -> str:
    return "-" if node is None else str(node)
